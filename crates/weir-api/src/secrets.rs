//! Secrets in job options: which option keys hold one, so that the Hub's answers (and the
//! workbench, which shows them) carry them redacted.

use serde_json::Value;

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
}
