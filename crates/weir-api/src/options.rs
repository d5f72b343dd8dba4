//! Typed decoding of a node's `options` object, with errors that name the JSON path of the field.

use crate::error::Error;
use serde::de::DeserializeOwned;

/// Decodes `options` into `T`, reporting the full JSON path (`base_path` + field) on failure.
///
/// Connectors and operators call this with the path the runtime hands them
/// (e.g. `sources[0].options`), so a typo in a nested field is reported as
/// `sources[0].options.format: unknown variant ...`.
///
/// # Errors
/// [`Error::Config`] naming the offending field when `options` does not match `T`.
pub fn decode_options<T: DeserializeOwned>(
    options: &serde_json::Value,
    base_path: &str,
) -> Result<T, Error> {
    serde_path_to_error::deserialize(options).map_err(|err| {
        let inner = err.path().to_string();
        let path = if inner == "." || inner.is_empty() {
            base_path.to_owned()
        } else if inner.starts_with('[') {
            format!("{base_path}{inner}")
        } else {
            format!("{base_path}.{inner}")
        };
        Error::config(path, err.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Opts {
        path: String,
        nested: Nested,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Nested {
        size: u32,
    }

    #[test]
    fn names_the_nested_field() {
        let value = serde_json::json!({"path": "x", "nested": {"size": "big"}});
        let err = decode_options::<Opts>(&value, "sources[0].options").unwrap_err();
        let Error::Config { path, message } = err else {
            panic!("expected a config error");
        };
        assert_eq!(path, "sources[0].options.nested.size");
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn names_unknown_fields() {
        let value = serde_json::json!({"path": "x", "nested": {"size": 1}, "pth": 1});
        let err = decode_options::<Opts>(&value, "sinks[2].options").unwrap_err();
        assert!(err.to_string().contains("sinks[2].options"), "{err}");
        assert!(err.to_string().contains("unknown field `pth`"), "{err}");
    }
}
