//! `${env:NAME}` references in a job's `checkpoint` and `state` sections. Connector options are
//! resolved where each connector is prepared (the runtime), so that plans and their
//! fingerprints keep the reference, never the secret; these sections are not part of any plan
//! and are resolved here, by whoever opens the checkpoint storage or the state backend.

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_api::secrets::{EnvAccess, resolve_env_json};

use crate::{CheckpointSpec, StateBackendSpec};

/// Reads one environment variable of this process.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<std::ffi::OsString>;

/// This process's environment, the lookup every caller outside tests uses.
pub fn process_env(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

impl CheckpointSpec {
    /// The section with every `${env:NAME}` reference of its `dir` and `s3` options replaced
    /// by the variable's value, as `access` allows (with [`EnvAccess::Unread`]: checked and
    /// left as written). Only a whole string value is a reference.
    ///
    /// # Errors
    /// The first malformed, refused or unset reference, naming its JSON path and variable.
    pub fn resolve_env(
        &self,
        access: &EnvAccess,
        lookup: EnvLookup<'_>,
    ) -> Result<CheckpointSpec, weir_api::Error> {
        resolve_section(self, "checkpoint", access, lookup)
    }
}

impl StateBackendSpec {
    /// The section with every `${env:NAME}` reference (the Redis password, say) replaced by
    /// the variable's value, as `access` allows; see [`CheckpointSpec::resolve_env`].
    ///
    /// # Errors
    /// The first malformed, refused or unset reference, naming its JSON path and variable.
    pub fn resolve_env(
        &self,
        access: &EnvAccess,
        lookup: EnvLookup<'_>,
    ) -> Result<StateBackendSpec, weir_api::Error> {
        resolve_section(self, "state", access, lookup)
    }
}

/// A section with its references resolved, through its JSON form.
fn resolve_section<T: Serialize + DeserializeOwned + Clone>(
    section: &T,
    path: &str,
    access: &EnvAccess,
    lookup: EnvLookup<'_>,
) -> Result<T, weir_api::Error> {
    let mut json = serde_json::to_value(section)
        .map_err(|e| weir_api::Error::config(path, format!("encoding the section: {e}")))?;
    if resolve_env_json(&mut json, path, access, lookup)? == 0 {
        return Ok(section.clone());
    }
    serde_json::from_value(json)
        .map_err(|e| weir_api::Error::config(path, format!("after resolving references: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobSpec;

    fn lookup(name: &str) -> Option<std::ffi::OsString> {
        (name == "CP_SECRET").then(|| "cp-secret".into())
    }

    const SPEC: &str = r#"
job: refs
checkpoint:
  interval: 1s
  dir: s3://bucket/cp
  s3: { access_key_id: k, secret_access_key: "${env:CP_SECRET}" }
sources:
  - { name: bids, connector: datagen }
sinks:
  - { name: out, connector: blackhole, input: bids }
"#;

    #[test]
    fn checkpoint_references_resolve_as_allowed() {
        let spec = JobSpec::from_yaml_str(SPEC, "refs.yaml").unwrap();
        let checkpoint = spec.checkpoint.unwrap();
        let resolved = checkpoint.resolve_env(&EnvAccess::All, &lookup).unwrap();
        let s3 = resolved.s3.as_ref().unwrap();
        assert_eq!(s3.secret_access_key.as_deref(), Some("cp-secret"));
        let unread = checkpoint.resolve_env(&EnvAccess::Unread, &lookup).unwrap();
        assert_eq!(unread, checkpoint);
        let err = checkpoint
            .resolve_env(&EnvAccess::Only(vec!["OTHER_*".into()]), &lookup)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("checkpoint.s3.secret_access_key") && err.contains("--allow-env"),
            "{err}"
        );
    }
}
