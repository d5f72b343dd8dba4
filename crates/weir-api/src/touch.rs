//! What a connector reads or writes outside its process, so that the places a job may touch
//! can be checked against allow-lists before any I/O.

use std::path::{Component, Path, PathBuf};

/// A place a connector touches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Touch {
    /// A local file or directory: absolute, with `.` and `..` resolved (lexically: symbolic
    /// links are not followed).
    Path(PathBuf),
    /// A remote place: an object store prefix (`s3://bucket/prefix`), an endpoint
    /// (`http://127.0.0.1:9000`), a broker (`kafka://host:9092`).
    Url(String),
}

impl Touch {
    /// A local path, made absolute against `cwd` with `.` and `..` resolved, so that
    /// `/data/../etc/passwd` is `/etc/passwd` and no prefix check can be walked around.
    pub fn local(path: &Path, cwd: &Path) -> Touch {
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        };
        let mut out = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other.as_os_str()),
            }
        }
        Touch::Path(out)
    }
}

impl std::fmt::Display for Touch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Touch::Path(p) => write!(f, "{}", p.display()),
            Touch::Url(u) => f.write_str(u),
        }
    }
}

/// Prefixes of the paths and URLs a process allows jobs to touch (an Agent's `--allow-path`
/// and `--allow-url`). Empty lists allow nothing of their kind; no lists at all is expressed
/// by not checking.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    /// Allowed local path prefixes, whole components (`/data` allows `/data/x`, not `/database`).
    pub paths: Vec<PathBuf>,
    /// Allowed URL prefixes, compared as text after lowercasing the scheme and host
    /// (`s3://bucket/in/`, `http://minio:9000`).
    pub urls: Vec<String>,
}

impl AllowList {
    /// Whether `touch` falls under one of the prefixes.
    pub fn allows(&self, touch: &Touch) -> bool {
        match touch {
            Touch::Path(p) => self.paths.iter().any(|prefix| p.starts_with(prefix)),
            Touch::Url(u) => {
                let u = normalize_url(u);
                self.urls.iter().any(|prefix| {
                    let prefix = normalize_url(prefix);
                    u == prefix
                        || (u.starts_with(&prefix)
                            && (prefix.ends_with('/') || u[prefix.len()..].starts_with('/')))
                })
            }
        }
    }

    /// The first of `touches` this list does not allow.
    pub fn first_refused<'a>(&self, touches: &'a [Touch]) -> Option<&'a Touch> {
        touches.iter().find(|t| !self.allows(t))
    }
}

/// A URL with its scheme and authority lowercased (they are case-insensitive), the rest kept.
fn normalize_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            format!(
                "{}://{}{path}",
                scheme.to_ascii_lowercase(),
                authority.to_ascii_lowercase()
            )
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_absolute_and_cannot_climb_out() {
        let cwd = Path::new("/work/jobs");
        assert_eq!(
            Touch::local(Path::new("in/x.csv"), cwd),
            Touch::Path("/work/jobs/in/x.csv".into())
        );
        assert_eq!(
            Touch::local(Path::new("/data/../etc/./passwd"), cwd),
            Touch::Path("/etc/passwd".into())
        );
        let allow = AllowList {
            paths: vec!["/data".into()],
            urls: vec![],
        };
        assert!(allow.allows(&Touch::local(Path::new("/data/in/*.csv"), cwd)));
        assert!(!allow.allows(&Touch::local(Path::new("/data/../etc/passwd"), cwd)));
        assert!(!allow.allows(&Touch::local(Path::new("/database"), cwd)));
    }

    #[test]
    fn urls_match_by_prefix_at_a_boundary() {
        let allow = AllowList {
            paths: vec![],
            urls: vec!["s3://bucket/in/".into(), "HTTP://MinIO:9000".into()],
        };
        assert!(allow.allows(&Touch::Url("s3://bucket/in/x.csv".into())));
        assert!(!allow.allows(&Touch::Url("s3://bucket/out/x".into())));
        assert!(allow.allows(&Touch::Url("http://minio:9000".into())));
        assert!(allow.allows(&Touch::Url("http://minio:9000/".into())));
        assert!(!allow.allows(&Touch::Url("http://minio:90001".into())));
        assert!(!allow.allows(&Touch::Url("http://169.254.169.254/latest".into())));
        let touches = [
            Touch::Url("s3://bucket/in/a".into()),
            Touch::Url("kafka://b:9092".into()),
        ];
        assert_eq!(
            allow.first_refused(&touches),
            Some(&Touch::Url("kafka://b:9092".into()))
        );
    }
}
