//! `weir plan`: a job's plans as JSON, and `weir plan diff`: what a restore of one version's
//! checkpoint into another keeps, starts empty or refuses (docs/fault-tolerance.md, "Changing
//! a job").

use crate::{Loaded, load, prepare_located, print_stdout};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use weir::Engine;
use weir::api::SemanticMode;
use weir::plan::evolution::{EvolutionActions, EvolutionReport, OperatorProfile, compare};
use weir_control::StateActions;

/// The arguments of `weir plan`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct PlanArgs {
    #[command(subcommand)]
    command: Option<PlanCommand>,
    /// The job spec or SQL script.
    job: Option<PathBuf>,
    /// Override the job's default parallelism.
    #[arg(short, long)]
    parallelism: Option<u32>,
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Compare two versions of a job operator by operator: what a restore of OLD's checkpoint
    /// or savepoint into NEW keeps, starts empty or refuses, and why. Exits non-zero when it
    /// would be refused.
    Diff {
        /// The version that took the checkpoint.
        old: PathBuf,
        /// The version that restores it.
        new: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        evolution: EvolutionFlags,
    },
}

/// The explicit actions of a restore into a changed job.
#[derive(Debug, Args, Default)]
pub(crate) struct EvolutionFlags {
    /// Let stateful operators the checkpoint does not have start empty.
    #[arg(long)]
    allow_new_state: bool,
    /// Drop the checkpoint's state of OPERATOR: removed from the job, or kept and started
    /// empty. Repeatable.
    #[arg(long, value_name = "OPERATOR")]
    drop_state: Vec<String>,
    /// Give the state of the checkpoint's operator OLD to the job's operator NEW (a renamed
    /// operator). Repeatable.
    #[arg(long, value_name = "OLD=NEW")]
    map_operator: Vec<String>,
}

impl EvolutionFlags {
    /// The flags as a Hub request carries them.
    pub(crate) fn state_actions(&self) -> Result<StateActions> {
        let mut map_operator = std::collections::BTreeMap::new();
        for pair in &self.map_operator {
            let Some((old, new)) = pair.split_once('=') else {
                bail!("--map-operator {pair}: expected OLD=NEW");
            };
            if old.is_empty() || new.is_empty() {
                bail!("--map-operator {pair}: expected OLD=NEW, both ids");
            }
            if map_operator
                .insert(old.to_owned(), new.to_owned())
                .is_some()
            {
                bail!("--map-operator {old}=...: given twice");
            }
        }
        Ok(StateActions {
            allow_new_state: self.allow_new_state,
            drop_state: self.drop_state.clone(),
            map_operator,
        })
    }

    /// The flags as the runtime takes them.
    pub(crate) fn actions(&self) -> Result<EvolutionActions> {
        let a = self.state_actions()?;
        Ok(EvolutionActions::from_names(
            a.allow_new_state,
            &a.drop_state,
            &a.map_operator,
        ))
    }
}

/// `weir plan`: the plans of a job, or `weir plan diff`.
pub(crate) async fn plan_command(engine: &Engine, args: PlanArgs) -> Result<()> {
    match (args.command, args.job) {
        (
            Some(PlanCommand::Diff {
                old,
                new,
                json,
                evolution,
            }),
            _,
        ) => diff_command(engine, &old, &new, json, &evolution.actions()?).await,
        (None, Some(job)) => {
            let Loaded { spec, file, .. } = load(engine, &job, args.parallelism).await?;
            let plans = weir::CompiledPlans::compile(&spec, Some(&file))?;
            print_stdout(&plans.to_json_pretty())
        }
        (None, None) => bail!("weir plan: give a job file, or `diff OLD NEW`"),
    }
}

/// The profiles of a job's operators and whether it is strictly exactly-once, after the deep
/// build `run` does.
async fn profiles(engine: &Engine, job: &Path) -> Result<(Vec<OperatorProfile>, bool)> {
    let (prepared, _) = prepare_located(engine, job, None)
        .await
        .with_context(|| format!("preparing {}", job.display()))?;
    let strict = prepared.semantic_mode == SemanticMode::StrictExactlyOnce;
    Ok((prepared.profiles(), strict))
}

/// `weir plan diff OLD NEW`.
async fn diff_command(
    engine: &Engine,
    old: &Path,
    new: &Path,
    json: bool,
    actions: &EvolutionActions,
) -> Result<()> {
    let (before, _) = profiles(engine, old).await?;
    let (after, strict) = profiles(engine, new).await?;
    let report = compare(&before, &after, actions, strict);
    if json {
        print_stdout(&serde_json::to_string_pretty(&report)?)?;
    } else {
        print_stdout(report.to_string().trim_end())?;
    }
    refusal(&report, old, new)
}

/// An error when `report` refuses the restore, naming the operators.
fn refusal(report: &EvolutionReport, old: &Path, new: &Path) -> Result<()> {
    let refused: Vec<String> = report
        .refusals()
        .map(|c| format!("`{}`", c.operator_id))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    bail!(
        "a restore of a checkpoint of {} into {} would be refused: {} (see above)",
        old.display(),
        new.display(),
        refused.join(", ")
    )
}
