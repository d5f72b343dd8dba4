//! Where a source reads or a sink writes: the object store, the path in it, the glob that selects
//! files, and the names files are given in messages (the user's own spelling of the path).

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::registry::ObjectStoreRegistry;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use url::Url;
use weir_api::{Error, Result, S3Options};

/// Characters that start a glob; the path before the last `/` preceding the first of them is
/// listed, the rest is matched.
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

/// A resolved `path` option.
#[derive(Debug, Clone)]
pub(crate) struct FileLocation {
    store: Arc<dyn ObjectStore>,
    /// The path in `store` of the file or directory before any glob.
    base: Path,
    /// How the user spelled `base` (may be empty for the current directory); file ids are this
    /// plus the path below `base`.
    display_base: String,
    /// The glob over paths below `base`, if the option had one.
    pattern: Option<glob::Pattern>,
    /// What it touches (see [`FileLocation::touches`]).
    touches: Vec<weir_api::Touch>,
    /// The option as written.
    given: String,
}

/// One file found by [`FileLocation::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedFile {
    /// The name users see: the path as they spelled it, plus the part below it.
    pub(crate) id: String,
    /// Its path in the store.
    pub(crate) path: Path,
    /// Its size in bytes.
    pub(crate) size: u64,
}

impl FileLocation {
    /// Resolves `given`: a URL through `registry`, anything else as a local path relative to `cwd`.
    ///
    /// # Errors
    /// [`Error::Config`] at `option_path` when the URL or path is invalid or its scheme has no
    /// store.
    #[cfg(test)]
    pub(crate) fn resolve(
        given: &str,
        registry: &dyn ObjectStoreRegistry,
        cwd: &std::path::Path,
        option_path: &str,
    ) -> Result<Self> {
        Self::resolve_with(given, registry, None, cwd, option_path)
    }

    /// Resolves `given` as [`Self::resolve`] does; an `s3://` (or `s3a://`) URL opens a store
    /// of its own with `s3` over the AWS environment variables.
    ///
    /// # Errors
    /// As [`Self::resolve`]; [`Error::Config`] at `option_path` when the S3 store cannot be
    /// built from the URL and options.
    pub(crate) fn resolve_with(
        given: &str,
        registry: &dyn ObjectStoreRegistry,
        s3: Option<&S3Options>,
        cwd: &std::path::Path,
        option_path: &str,
    ) -> Result<Self> {
        if given.trim().is_empty() {
            return Err(Error::config(option_path, "the path is empty"));
        }
        let (prefix, pattern_text) = split_glob(given);
        let pattern = pattern_text
            .map(|text| {
                glob::Pattern::new(text)
                    .map_err(|e| Error::config(option_path, format!("invalid glob `{text}`: {e}")))
            })
            .transpose()?;
        let mut touches = Vec::new();
        let (store, base) = if is_url(given) {
            touches.push(weir_api::Touch::Url(prefix.to_owned()));
            let url = Url::parse(prefix)
                .map_err(|e| Error::config(option_path, format!("invalid URL `{prefix}`: {e}")))?;
            if weir_api::is_s3_url(prefix) {
                let options = s3
                    .cloned()
                    .unwrap_or_default()
                    .object_store_options(std::env::vars());
                // The endpoint the store connects to, from the options or the environment.
                touches.extend(
                    options
                        .iter()
                        .filter(|(k, _)| k == "aws_endpoint" || k == "aws_endpoint_url")
                        .map(|(_, v)| weir_api::Touch::Url(v.clone())),
                );
                let (store, base) = object_store::parse_url_opts(&url, options).map_err(|e| {
                    Error::config(option_path, format!("cannot open `{prefix}`: {e}"))
                })?;
                (Arc::from(store), base)
            } else {
                registry.resolve(&url).map_err(|e| {
                    Error::config(option_path, format!("no object store for `{prefix}`: {e}"))
                })?
            }
        } else {
            let relative = if prefix.is_empty() { "." } else { prefix };
            touches.push(weir_api::Touch::local(std::path::Path::new(relative), cwd));
            let absolute = normalize(&cwd.join(relative));
            let base = Path::from_absolute_path(&absolute)
                .map_err(|e| Error::config(option_path, format!("invalid path `{given}`: {e}")))?;
            (
                Arc::new(LocalFileSystem::new()) as Arc<dyn ObjectStore>,
                base,
            )
        };
        Ok(Self {
            store,
            base,
            display_base: prefix.to_owned(),
            pattern,
            given: given.to_owned(),
            touches,
        })
    }

    /// What reading or writing here touches: the local path before any glob, or the URL and
    /// the S3 endpoint.
    pub(crate) fn touches(&self) -> Vec<weir_api::Touch> {
        self.touches.clone()
    }

    /// The store files live in.
    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The path before any glob: the file, or the directory that is listed.
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// The option as the user wrote it.
    pub(crate) fn given(&self) -> &str {
        &self.given
    }

    /// Whether the option had a glob.
    pub(crate) fn has_glob(&self) -> bool {
        self.pattern.is_some()
    }

    /// The user-facing name of the object `relative` below [`Self::base`].
    pub(crate) fn display(&self, relative: &str) -> String {
        if self.display_base.is_empty() {
            relative.to_owned()
        } else if self.display_base.ends_with('/') {
            format!("{}{relative}", self.display_base)
        } else {
            format!("{}/{relative}", self.display_base)
        }
    }

    /// The path of the object `relative` below [`Self::base`].
    ///
    /// # Errors
    /// [`Error::Internal`] when `relative` is not a valid object path.
    pub(crate) fn child(&self, relative: &str) -> Result<Path> {
        let raw = if self.base.as_ref().is_empty() {
            relative.to_owned()
        } else {
            format!("{}/{relative}", self.base.as_ref())
        };
        Path::parse(&raw).map_err(|e| Error::Internal(format!("invalid object path `{raw}`: {e}")))
    }

    /// The store path of the file a split id names (the inverse of the naming in [`Self::list`]).
    ///
    /// # Errors
    /// [`Error::Config`] at `option_path` when `id` is not below this location (a split restored
    /// into a job whose `path` changed).
    pub(crate) fn path_of(&self, id: &str, option_path: &str) -> Result<Path> {
        if id == self.given && self.pattern.is_none() {
            return Ok(self.base.clone());
        }
        let relative = if self.display_base.is_empty() {
            Some(id)
        } else if self.display_base.ends_with('/') {
            id.strip_prefix(self.display_base.as_str())
        } else {
            id.strip_prefix(self.display_base.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
        };
        match relative {
            Some(relative) if !relative.is_empty() => self.child(relative),
            _ => Err(Error::config(
                option_path,
                format!("split `{id}` is not a file under `{}`", self.given),
            )),
        }
    }

    /// Lists the files this location selects, sorted by id.
    ///
    /// Without a glob, a path naming a file selects that file; otherwise everything below the
    /// directory is selected. Names with a segment starting with `.` or `_` below the listed
    /// directory are skipped (staging files, `_SUCCESS` markers). An empty result is not an error
    /// here.
    ///
    /// # Errors
    /// External errors when the store cannot be listed.
    pub(crate) async fn list(&self) -> Result<Vec<ListedFile>> {
        if self.pattern.is_none() && !self.base.as_ref().is_empty() {
            match self.store.head(&self.base).await {
                Ok(meta) => {
                    return Ok(vec![ListedFile {
                        id: self.given.clone(),
                        path: meta.location,
                        size: meta.size,
                    }]);
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(format!("reading `{}`", self.given), e)),
            }
        }
        let prefix = (!self.base.as_ref().is_empty()).then_some(&self.base);
        let context = || format!("listing `{}`", self.given);
        // A glob without `/` cannot match below the first level: list that level only.
        let shallow = self
            .pattern
            .as_ref()
            .is_some_and(|p| !p.as_str().contains('/'));
        let metas = if shallow {
            match self.store.list_with_delimiter(prefix).await {
                Ok(listing) => listing.objects,
                Err(object_store::Error::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(store_error(context(), e)),
            }
        } else {
            self.store
                .list(prefix)
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| store_error(context(), e))?
        };
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: true,
        };
        let mut files = Vec::new();
        for meta in metas {
            let Some(parts) = meta.location.prefix_match(&self.base) else {
                continue;
            };
            let relative = parts
                .map(|part| part.as_ref().to_owned())
                .collect::<Vec<_>>();
            if relative.is_empty()
                || relative
                    .iter()
                    .any(|part| part.starts_with('.') || part.starts_with('_'))
            {
                continue;
            }
            let relative = relative.join("/");
            if let Some(pattern) = &self.pattern
                && !pattern.matches_with(&relative, options)
            {
                continue;
            }
            files.push(ListedFile {
                id: self.display(&relative),
                path: meta.location,
                size: meta.size,
            });
        }
        files.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(files)
    }
}

/// Splits `path` into the part before the glob (up to and including the last `/` before the
/// first glob character) and the glob, if any.
fn split_glob(path: &str) -> (&str, Option<&str>) {
    let Some(first) = path.find(GLOB_CHARS) else {
        return (path, None);
    };
    match path[..first].rfind('/') {
        Some(slash) => (&path[..=slash], Some(&path[slash + 1..])),
        None => ("", Some(path)),
    }
}

/// Whether `path` is a URL (`scheme://...`) rather than a local path.
fn is_url(path: &str) -> bool {
    path.split_once("://").is_some_and(|(scheme, _)| {
        scheme.len() >= 2
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// Removes `.` and `..` components without touching the file system (the path may not exist).
fn normalize(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Wraps an object-store failure; only transient-looking failures are marked retryable.
pub(crate) fn store_error(context: impl Into<String>, err: object_store::Error) -> Error {
    let retryable = matches!(
        err,
        object_store::Error::Generic { .. } | object_store::Error::JoinError { .. }
    );
    Error::external("object store", context, err, retryable)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use object_store::registry::DefaultObjectStoreRegistry;

    fn touch(dir: &std::path::Path, relative: &str) {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    fn ids(files: &[ListedFile]) -> Vec<&str> {
        files.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn splits_globs_at_the_last_slash_before_them() {
        assert_eq!(split_glob("data/*.csv"), ("data/", Some("*.csv")));
        assert_eq!(split_glob("a/b/**/x?.json"), ("a/b/", Some("**/x?.json")));
        assert_eq!(split_glob("*.csv"), ("", Some("*.csv")));
        assert_eq!(split_glob("data/a.csv"), ("data/a.csv", None));
        assert!(is_url("file:///tmp/x"));
        assert!(is_url("memory:///x"));
        assert!(!is_url("data/x.csv"));
        assert!(!is_url("C:\\data"));
    }

    #[tokio::test]
    async fn relative_globs_keep_the_users_spelling() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "data/b.csv");
        touch(dir.path(), "data/a.csv");
        touch(dir.path(), "data/c.json");
        touch(dir.path(), "data/sub/d.csv");
        touch(dir.path(), "data/_tmp.csv");
        let registry = DefaultObjectStoreRegistry::new();
        let loc = FileLocation::resolve("data/*.csv", &registry, dir.path(), "p").unwrap();
        let files = loc.list().await.unwrap();
        assert_eq!(ids(&files), ["data/a.csv", "data/b.csv"]);
        assert_eq!(loc.path_of("data/a.csv", "p").unwrap(), files[0].path);

        let loc = FileLocation::resolve("./data/**/*.csv", &registry, dir.path(), "p").unwrap();
        let files = loc.list().await.unwrap();
        assert_eq!(
            ids(&files),
            ["./data/a.csv", "./data/b.csv", "./data/sub/d.csv"]
        );
        assert_eq!(loc.path_of("./data/sub/d.csv", "p").unwrap(), files[2].path);
    }

    #[tokio::test]
    async fn directories_list_recursively_and_skip_hidden_names() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "out/part-1.json");
        touch(dir.path(), "out/x/part-2.json");
        touch(dir.path(), "out/.hidden/part-3.json");
        touch(dir.path(), "out/_SUCCESS");
        let registry = DefaultObjectStoreRegistry::new();
        let loc = FileLocation::resolve("out", &registry, dir.path(), "p").unwrap();
        let files = loc.list().await.unwrap();
        assert_eq!(ids(&files), ["out/part-1.json", "out/x/part-2.json"]);

        let url = format!("file://{}/out/", dir.path().display());
        let loc = FileLocation::resolve(&url, &registry, dir.path(), "p").unwrap();
        let files = loc.list().await.unwrap();
        assert_eq!(files[0].id, format!("{url}part-1.json"));
        assert_eq!(loc.path_of(&files[1].id, "p").unwrap(), files[1].path);
    }

    #[tokio::test]
    async fn a_file_path_selects_the_file() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "data/a.csv");
        let registry = DefaultObjectStoreRegistry::new();
        let loc = FileLocation::resolve("data/../data/a.csv", &registry, dir.path(), "p").unwrap();
        let files = loc.list().await.unwrap();
        assert_eq!(ids(&files), ["data/../data/a.csv"]);
        assert_eq!(files[0].size, 1);
        assert_eq!(
            loc.path_of("data/../data/a.csv", "p").unwrap(),
            files[0].path
        );
        let missing = FileLocation::resolve("nope/*.csv", &registry, dir.path(), "p").unwrap();
        assert!(missing.list().await.unwrap().is_empty());
    }
}
