//! Secrets in job options: which option keys hold one, so that the Hub's answers (and the
//! workbench, which shows them) carry them redacted, and `${env:NAME}` references, so that a
//! secret can come from the environment of the process that runs the job instead of the job's
//! text.

use serde_json::Value;

use crate::Error;

/// What a redacted secret shows instead of its value.
pub const REDACTED: &str = "******";

/// Whether option `key` (a SQL `WITH` key, a spec option, a `properties.*` key) holds a secret:
/// its last segment names a secret, password, token, credential or private key, or it is a JAAS
/// config (which holds a password).
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    if lower.ends_with("jaas.config") {
        return true;
    }
    let last = lower.rsplit(['.', '/']).next().unwrap_or(&lower);
    [
        "secret",
        "password",
        "passwd",
        "token",
        "credential",
        "private-key",
        "private_key",
    ]
    .iter()
    .any(|word| last.contains(word))
}

/// Replaces, at any depth of `value`, the string under every secret key (see
/// [`is_secret_key`]) with [`REDACTED`].
pub fn redact_json(value: &mut Value) {
    // Iterative: a stored spec is bounded, but nothing here should recurse on input depth.
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match item {
                        Value::String(s) if is_secret_key(key) => {
                            *s = REDACTED.to_owned();
                        }
                        other => stack.push(other),
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// A `{:?}` view of string options (Kafka `properties.*`, say) with every secret value
/// replaced by [`REDACTED`], for `Debug` implementations of option structs.
pub struct RedactedOptions<'a>(pub &'a std::collections::BTreeMap<String, String>);

impl std::fmt::Debug for RedactedOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let shown = if is_secret_key(k) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (k, shown)
            }))
            .finish()
    }
}

/// The longest variable name a reference may hold.
const MAX_ENV_NAME: usize = 256;

/// The variable `value` refers to when the whole string is a `${env:NAME}` reference (NAME
/// made of ASCII letters, digits and `_`, not starting with a digit); `Ok(None)` when it is
/// not a reference at all, an error message when it looks like one but is malformed.
pub fn env_reference(value: &str) -> Result<Option<&str>, String> {
    let Some(rest) = value.strip_prefix("${env:") else {
        return Ok(None);
    };
    let Some(name) = rest.strip_suffix('}') else {
        return Err(
            "a reference to an environment variable is written `${env:NAME}`, the \
                    whole value"
                .to_owned(),
        );
    };
    let valid = !name.is_empty()
        && name.len() <= MAX_ENV_NAME
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Ok(Some(name))
    } else {
        Err(format!(
            "`{}` is not an environment variable name (ASCII letters, digits and `_`, not \
             starting with a digit)",
            crate::error::excerpt(name)
        ))
    }
}

/// Which environment variables `${env:NAME}` references may read in this process: every one
/// (`weir run`, `weir validate`), the names an Agent allows with `--allow-env`, or none at all
/// while references stay as written (the Hub, which validates jobs it does not run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EnvAccess {
    /// Any variable of this process.
    #[default]
    All,
    /// Only these names; one ending in `*` allows every name with that prefix. Empty: none.
    Only(Vec<String>),
    /// References are checked for their form and left as written: this process does not run
    /// the job, and its environment is not the one the job will run in.
    Unread,
}

impl EnvAccess {
    /// Whether a reference may read variable `name`.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            EnvAccess::All => true,
            EnvAccess::Only(names) => names.iter().any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => allowed == name,
            }),
            EnvAccess::Unread => false,
        }
    }

    /// The value a reference to `name` at `path` resolves to, read with `lookup` (the
    /// process environment in [`resolve_env_json`]'s callers).
    ///
    /// # Errors
    /// A config error at `path` when the variable is not allowed, not set, not UTF-8 or
    /// itself holds a reference (references do not chain).
    pub fn resolve(
        &self,
        name: &str,
        path: &str,
        lookup: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<String, Error> {
        if !self.allows(name) {
            return Err(Error::config(
                path,
                format!(
                    "`${{env:{name}}}`: this process does not allow jobs to read environment \
                     variable {name} (an Agent reads only the names given with --allow-env)"
                ),
            ));
        }
        let value = lookup(name).ok_or_else(|| {
            Error::config(
                path,
                format!("`${{env:{name}}}`: environment variable {name} is not set"),
            )
        })?;
        let value = value.into_string().map_err(|_| {
            Error::config(
                path,
                format!("`${{env:{name}}}`: environment variable {name} is not UTF-8"),
            )
        })?;
        if value.starts_with("${env:") {
            return Err(Error::config(
                path,
                format!(
                    "`${{env:{name}}}`: the value of {name} is itself a reference; references \
                     do not chain"
                ),
            ));
        }
        Ok(value)
    }
}

/// Replaces every string of `value` (at any depth) that is a whole `${env:NAME}` reference
/// with the variable's value, as `access` allows; `path` is `value`'s JSON path, for errors.
/// Returns how many references it replaced. With [`EnvAccess::Unread`] it only checks their
/// form and replaces none: what the Hub does, whose environment is not the one the job runs in.
///
/// # Errors
/// The first malformed, refused or unset reference, at its JSON path.
pub fn resolve_env_json(
    value: &mut Value,
    path: &str,
    access: &EnvAccess,
    lookup: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<usize, Error> {
    let mut replaced = 0;
    // Iterative, as in `redact_json`: nothing here recurses on input depth.
    let mut stack = vec![(value, path.to_owned())];
    while let Some((v, at)) = stack.pop() {
        match v {
            Value::String(s) => {
                let name = env_reference(s).map_err(|m| Error::config(&at, m))?;
                if let Some(name) = name.filter(|_| *access != EnvAccess::Unread) {
                    *s = access.resolve(name, &at, lookup)?;
                    replaced += 1;
                }
            }
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    let child = format!("{at}.{key}");
                    stack.push((item, child));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    stack.push((item, format!("{at}[{i}]")));
                }
            }
            _ => {}
        }
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_are_recognised_by_their_last_segment() {
        for key in [
            "s3.secret-key",
            "secret_access_key",
            "properties.sasl.password",
            "properties.ssl.key.password",
            "s3.session-token",
            "properties.sasl.jaas.config",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "s3.access-key",
            "properties.bootstrap.servers",
            "path",
            "token_bucket.rate.limit",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let mut spec = json!({
            "sinks": [{"options": {"s3.secret-key": "abc", "path": "s3://b/x"}}],
            "checkpoint": {"s3": {"secret_access_key": "def", "region": "eu"}},
            "password": 5
        });
        redact_json(&mut spec);
        assert_eq!(spec["sinks"][0]["options"]["s3.secret-key"], REDACTED);
        assert_eq!(spec["sinks"][0]["options"]["path"], "s3://b/x");
        assert_eq!(spec["checkpoint"]["s3"]["secret_access_key"], REDACTED);
        assert_eq!(spec["checkpoint"]["s3"]["region"], "eu");
        assert_eq!(spec["password"], 5);
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name: &str| map.get(name).map(std::ffi::OsString::from)
    }

    #[test]
    fn whole_value_references_are_replaced_at_any_depth() {
        let lookup = env(&[("KAFKA_PASSWORD", "hunter2"), ("S3_SECRET", "s3cr3t")]);
        let mut options = json!({
            "properties": {"sasl.password": "${env:KAFKA_PASSWORD}"},
            "s3.secret-key": "${env:S3_SECRET}",
            "path": "/data/${env:S3_SECRET}",
            "list": ["${env:S3_SECRET}", 3],
        });
        let n =
            resolve_env_json(&mut options, "sinks[0].options", &EnvAccess::All, &lookup).unwrap();
        assert_eq!(n, 3);
        assert_eq!(options["properties"]["sasl.password"], "hunter2");
        assert_eq!(options["s3.secret-key"], "s3cr3t");
        // Only a whole value is a reference.
        assert_eq!(options["path"], "/data/${env:S3_SECRET}");
        assert_eq!(options["list"][0], "s3cr3t");
    }

    #[test]
    fn refused_unset_malformed_and_chained_references_name_their_path() {
        let lookup = env(&[("WEIR_JOIN_TOKEN", "j"), ("CHAIN", "${env:OTHER}")]);
        let only = EnvAccess::Only(vec!["KAFKA_*".into(), "CHAIN".into()]);
        let cases = [
            (json!({"a": "${env:WEIR_JOIN_TOKEN}"}), "does not allow"),
            (json!({"a": "${env:KAFKA_PASSWORD}"}), "is not set"),
            (json!({"a": "${env:CHAIN}"}), "do not chain"),
            (
                json!({"a": "${env:1X}"}),
                "not an environment variable name",
            ),
            (
                json!({"a": "${env:A-B}"}),
                "not an environment variable name",
            ),
            (json!({"a": "${env:X"}), "the whole value"),
        ];
        for (mut options, expected) in cases {
            let err = resolve_env_json(&mut options, "o", &only, &lookup).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("at o.a") && text.contains(expected), "{text}");
        }
        let mut nested = json!({"a": ["${env:1X}"]});
        assert!(resolve_env_json(&mut nested, "o", &EnvAccess::Unread, &lookup).is_err());
        assert!(!EnvAccess::Only(vec![]).allows("X"));
        assert!(EnvAccess::All.allows("X"));
        // Unread: checked, left as written.
        let mut options = json!({"a": "${env:WEIR_JOIN_TOKEN}"});
        assert_eq!(
            resolve_env_json(&mut options, "o", &EnvAccess::Unread, &lookup).unwrap(),
            0
        );
        assert_eq!(options["a"], "${env:WEIR_JOIN_TOKEN}");
        let mut bad = json!({"a": "${env:1X}"});
        assert!(resolve_env_json(&mut bad, "o", &EnvAccess::Unread, &lookup).is_err());
    }

    #[test]
    fn redacted_options_hide_secret_values() {
        let map = std::collections::BTreeMap::from([
            ("sasl.password".to_owned(), "hunter2".to_owned()),
            ("bootstrap.servers".to_owned(), "b:9092".to_owned()),
        ]);
        let shown = format!("{:?}", RedactedOptions(&map));
        assert!(
            !shown.contains("hunter2") && shown.contains("b:9092"),
            "{shown}"
        );
    }
}
