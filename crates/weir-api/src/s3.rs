//! The connection options of `s3://` URLs, shared by the file connector and checkpoint storage.
//!
//! This module holds only data and its validation (no object-store dependency): a store is built
//! from [`S3Options::object_store_options`], the `aws_*` configuration keys of the
//! `object_store` crate.

use crate::error::Error;
use serde::{Deserialize, Serialize};

/// Whether `url` names S3 storage (`s3://bucket/...` or `s3a://bucket/...`).
pub fn is_s3_url(url: &str) -> bool {
    let lower = url.get(..6).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("s3://") || lower.starts_with("s3a://")
}

/// How to reach the S3 (or S3-compatible) server of an `s3://` URL. Every field is optional:
/// what is not set comes from the usual AWS environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT`,
/// `AWS_ALLOW_HTTP`, ...), then from the defaults of AWS itself.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Options {
    /// The server's URL, e.g. `http://127.0.0.1:9000` for a local S3-compatible server;
    /// default: AWS S3 of the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region (default `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The access key id; needs `secret_access_key`. When set, the AWS credential environment
    /// variables are not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// The secret access key; needs `access_key_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    /// A session token of temporary credentials; needs both keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
    /// Path-style requests (`{endpoint}/{bucket}/{key}`, the default) or, when `false`,
    /// virtual-hosted-style requests (`{bucket}.{endpoint}/{key}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_style: Option<bool>,
    /// Whether plain `http://` endpoints are allowed; default: `true` when `endpoint` starts
    /// with `http://`, else `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_http: Option<bool>,
}

impl std::fmt::Debug for S3Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &redacted(&self.secret_access_key))
            .field("session_token", &redacted(&self.session_token))
            .field("path_style", &self.path_style)
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// The SQL keys of [`S3Options`] (`WITH (...)` of a file table, `SET` for checkpoints): Flink's
/// names where Flink has one, and the field each sets.
pub const S3_SQL_KEYS: [(&str, &str); 7] = [
    ("s3.endpoint", "endpoint"),
    ("s3.region", "region"),
    ("s3.access-key", "access_key_id"),
    ("s3.secret-key", "secret_access_key"),
    ("s3.session-token", "session_token"),
    ("s3.path.style.access", "path_style"),
    ("s3.allow-http", "allow_http"),
];

/// Environment variables that carry credentials; not used when the options name a key.
const CREDENTIAL_VARIABLES: [&str; 3] = [
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
];

/// Checks the `s3` options of a connector whose `path` option is `given`: valid, and only with
/// an `s3://` path. `options_path` is the JSON path of the connector's options, for errors.
///
/// # Errors
/// [`Error::Config`] at `{options_path}.s3` (or below it) naming what is wrong.
pub fn check_path_s3(given: &str, s3: Option<&S3Options>, options_path: &str) -> Result<(), Error> {
    let Some(s3) = s3 else { return Ok(()) };
    let s3_path = format!("{options_path}.s3");
    if !is_s3_url(given) {
        return Err(Error::config(
            s3_path,
            format!("S3 options apply to s3:// paths only, but the path is `{given}`"),
        ));
    }
    s3.validate(&s3_path)
}

impl S3Options {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Sets the field of SQL key `key` (one of [`S3_SQL_KEYS`], case-insensitive) from its text.
    ///
    /// # Errors
    /// A message naming the key for an unknown key or a boolean that is not `true`/`false`.
    pub fn set_sql(&mut self, key: &str, value: &str) -> Result<(), String> {
        let lower = key.to_ascii_lowercase();
        let Some((_, field)) = S3_SQL_KEYS.iter().find(|(k, _)| *k == lower) else {
            let known: Vec<&str> = S3_SQL_KEYS.iter().map(|(k, _)| *k).collect();
            return Err(format!(
                "unknown S3 option '{key}'; known: {}",
                known.join(", ")
            ));
        };
        let flag = || match value.to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(format!("'{key}' is true or false, not '{value}'")),
        };
        let text = Some(value.to_owned());
        match *field {
            "endpoint" => self.endpoint = text,
            "region" => self.region = text,
            "access_key_id" => self.access_key_id = text,
            "secret_access_key" => self.secret_access_key = text,
            "session_token" => self.session_token = text,
            "path_style" => self.path_style = flag()?,
            _ => self.allow_http = flag()?,
        }
        Ok(())
    }

    /// Checks the combination of fields; `path` is the JSON path of the options, for errors.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field: a key without its partner, a session token without
    /// keys, an endpoint that is not an `http://` or `https://` URL, an `http://` endpoint with
    /// `allow_http: false`, an empty value.
    pub fn validate(&self, path: &str) -> Result<(), Error> {
        let field = |name: &str| format!("{path}.{name}");
        for (name, value) in [
            ("endpoint", &self.endpoint),
            ("region", &self.region),
            ("access_key_id", &self.access_key_id),
            ("secret_access_key", &self.secret_access_key),
            ("session_token", &self.session_token),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(Error::config(field(name), "must not be empty"));
            }
        }
        match (&self.access_key_id, &self.secret_access_key) {
            (Some(_), None) => {
                return Err(Error::config(
                    field("secret_access_key"),
                    "`access_key_id` is set, so `secret_access_key` must be too",
                ));
            }
            (None, Some(_)) => {
                return Err(Error::config(
                    field("access_key_id"),
                    "`secret_access_key` is set, so `access_key_id` must be too",
                ));
            }
            _ => {}
        }
        if self.session_token.is_some() && self.access_key_id.is_none() {
            return Err(Error::config(
                field("session_token"),
                "a session token needs `access_key_id` and `secret_access_key`",
            ));
        }
        if let Some(endpoint) = &self.endpoint {
            let lower = endpoint.to_ascii_lowercase();
            if lower.starts_with("http://") {
                if self.allow_http == Some(false) {
                    return Err(Error::config(
                        field("allow_http"),
                        format!(
                            "the endpoint `{endpoint}` is plain http, but `allow_http` is false"
                        ),
                    ));
                }
            } else if !lower.starts_with("https://") {
                return Err(Error::config(
                    field("endpoint"),
                    format!(
                        "`{endpoint}` is not an http:// or https:// URL (e.g. http://127.0.0.1:9000)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The `object_store` configuration (`aws_*` keys, as `object_store::parse_url_opts` takes
    /// them) of these options over `env` (the process environment, `std::env::vars()`): the
    /// `AWS_*` variables first, then every field that is set. Credentials from `env` are left
    /// out when the options name a key. Conditional put is the `If-None-Match`/`If-Match`
    /// headers (`aws_conditional_put=etag`) and copy-if-not-exists is a multipart copy
    /// (`aws_copy_if_not_exists=multipart`) whatever the environment says: create-if-absent
    /// publication depends on them.
    pub fn object_store_options(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with("AWS_"))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .filter(|(k, _)| {
                self.access_key_id.is_none() || !CREDENTIAL_VARIABLES.contains(&k.as_str())
            })
            .collect();
        let mut set = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                out.push((key.to_owned(), v));
            }
        };
        set("aws_endpoint", self.endpoint.clone());
        set("aws_region", self.region.clone());
        set("aws_access_key_id", self.access_key_id.clone());
        set("aws_secret_access_key", self.secret_access_key.clone());
        set("aws_session_token", self.session_token.clone());
        set(
            "aws_virtual_hosted_style_request",
            self.path_style.map(|p| (!p).to_string()),
        );
        let http_endpoint = self
            .endpoint
            .as_deref()
            .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"));
        set(
            "aws_allow_http",
            self.allow_http
                .or(http_endpoint.then_some(true))
                .map(|a| a.to_string()),
        );
        set("aws_conditional_put", Some("etag".to_owned()));
        set("aws_copy_if_not_exists", Some("multipart".to_owned()));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn urls() {
        assert!(is_s3_url("s3://b/x"));
        assert!(is_s3_url("S3A://b"));
        assert!(!is_s3_url("file:///x"));
        assert!(!is_s3_url("s3"));
    }

    #[test]
    fn sql_keys_set_fields_and_refuse_the_rest() {
        let mut o = S3Options::default();
        o.set_sql("s3.endpoint", "http://127.0.0.1:9").unwrap();
        o.set_sql("S3.Path.Style.Access", "TRUE").unwrap();
        o.set_sql("s3.access-key", "k").unwrap();
        o.set_sql("s3.secret-key", "s").unwrap();
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(o.path_style, Some(true));
        assert!(
            o.set_sql("s3.allow-http", "yes")
                .unwrap_err()
                .contains("true or false")
        );
        assert!(
            o.set_sql("s3.acess-key", "k")
                .unwrap_err()
                .contains("known: s3.endpoint")
        );
        o.validate("x").unwrap();
        assert!(!format!("{o:?}").contains("\"s\""), "{o:?}");
    }

    #[test]
    fn validation_names_the_field() {
        let path_of = |o: S3Options| match o.validate("checkpoint.s3").unwrap_err() {
            Error::Config { path, .. } => path,
            other => panic!("{other}"),
        };
        let key_only = S3Options {
            access_key_id: Some("k".into()),
            ..S3Options::default()
        };
        assert_eq!(path_of(key_only), "checkpoint.s3.secret_access_key");
        let token_only = S3Options {
            session_token: Some("t".into()),
            ..S3Options::default()
        };
        assert_eq!(path_of(token_only), "checkpoint.s3.session_token");
        let ftp = S3Options {
            endpoint: Some("ftp://x".into()),
            ..S3Options::default()
        };
        assert_eq!(path_of(ftp), "checkpoint.s3.endpoint");
        let no_http = S3Options {
            endpoint: Some("http://x".into()),
            allow_http: Some(false),
            ..S3Options::default()
        };
        assert_eq!(path_of(no_http), "checkpoint.s3.allow_http");
    }

    #[test]
    fn object_store_options_over_the_environment() {
        let env = vec![
            ("AWS_ACCESS_KEY_ID".to_owned(), "env-key".to_owned()),
            ("AWS_SESSION_TOKEN".to_owned(), "env-token".to_owned()),
            ("AWS_REGION".to_owned(), "eu-west-1".to_owned()),
            (
                "AWS_COPY_IF_NOT_EXISTS".to_owned(),
                "header: x: y".to_owned(),
            ),
            ("HOME".to_owned(), "/root".to_owned()),
        ];
        let from_env = S3Options::default().object_store_options(env.clone());
        assert_eq!(get(&from_env, "aws_access_key_id"), Some("env-key"));
        assert_eq!(get(&from_env, "aws_region"), Some("eu-west-1"));
        assert_eq!(get(&from_env, "aws_copy_if_not_exists"), Some("multipart"));
        assert_eq!(get(&from_env, "aws_conditional_put"), Some("etag"));
        assert_eq!(get(&from_env, "home"), None);
        assert_eq!(get(&from_env, "aws_allow_http"), None);

        let explicit = S3Options {
            endpoint: Some("http://127.0.0.1:9".into()),
            access_key_id: Some("k".into()),
            secret_access_key: Some("s".into()),
            path_style: Some(false),
            ..S3Options::default()
        }
        .object_store_options(env);
        assert_eq!(get(&explicit, "aws_access_key_id"), Some("k"));
        assert_eq!(get(&explicit, "aws_session_token"), None);
        assert_eq!(
            get(&explicit, "aws_virtual_hosted_style_request"),
            Some("true")
        );
        assert_eq!(get(&explicit, "aws_allow_http"), Some("true"));
        assert_eq!(get(&explicit, "aws_endpoint"), Some("http://127.0.0.1:9"));
    }
}
