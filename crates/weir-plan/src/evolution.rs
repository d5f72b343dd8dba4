//! Changing a job and keeping its state: what a restore of a checkpoint that one version of a
//! job took does, operator by operator, when another version of the job restores it.
//!
//! Every checkpoint records an [`OperatorProfile`] of each operator: whether it keeps state
//! and what that state depends on (its keys, the key hash, the state shard count, a signature
//! of its type, options and input columns, and a sink's delivery protocol). [`compare`] holds
//! the profiles of the checkpoint against those of the job restoring it and gives a verdict per
//! operator under the rules of docs/fault-tolerance.md ("Changing a job"): stateless operators
//! come and go freely; a stateful operator keeps its state only where nothing its state depends
//! on changed; anything else needs an explicit [`EvolutionActions`] or is refused.

use crate::model::NodeKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use weir_api::OperatorId;

/// What a restore needs to know of one operator of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorProfile {
    /// The operator's id, which its state is stored under.
    pub operator_id: OperatorId,
    /// Source, operator or sink.
    pub kind: NodeKind,
    /// Its registered type (`window`, `filter`, the connector of a source or sink).
    pub type_name: String,
    /// Whether it keeps state in a checkpoint: a source its read positions, a sink its
    /// transactions, a keyed operator its keyed state.
    pub stateful: bool,
    /// The key columns of each input of a keyed operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<Vec<String>>,
    /// The key hash of its vertex (keyed operators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hash: Option<String>,
    /// The state shard count of its vertex (keyed operators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_shard_count: Option<u32>,
    /// Lower-case hex SHA-256 of what the meaning of its state depends on: its type, its
    /// options and its input columns with their types. Equal signatures read each other's
    /// state.
    pub state_signature: String,
    /// A sink's delivery protocol (`two-phase-commit`, `at-least-once`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

/// What the user allows a restore into a changed job to do beyond keeping state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvolutionActions {
    /// Stateful operators the checkpoint does not have may start empty (`--allow-new-state`).
    pub allow_new_state: bool,
    /// Operators whose state in the checkpoint is dropped: removed from the job, or kept in
    /// it and started empty (`--drop-state`).
    pub drop_state: BTreeSet<OperatorId>,
    /// Operators of the checkpoint that have another id in the job, old -> new
    /// (`--map-operator old=new`).
    pub map_operator: BTreeMap<OperatorId, OperatorId>,
}

impl EvolutionActions {
    /// The actions from operator ids as text (a request or the command line): new stateful
    /// operators allowed, the ids whose state is dropped, and `(old, new)` renames.
    pub fn from_names<'a>(
        allow_new_state: bool,
        drop_state: impl IntoIterator<Item = &'a String>,
        map_operator: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Self {
        Self {
            allow_new_state,
            drop_state: drop_state.into_iter().map(OperatorId::new).collect(),
            map_operator: map_operator
                .into_iter()
                .map(|(old, new)| (OperatorId::new(old), OperatorId::new(new)))
                .collect(),
        }
    }

    /// Whether no action is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A rule of changing a job that a change breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A stateful operator was added: it starts empty only with `--allow-new-state`.
    NewState,
    /// A stateful operator was removed: its state goes only with `--drop-state`.
    RemovedState,
    /// An operator's keys, key hash or state shard count changed: its state cannot be found by
    /// the new keys (a reshard is a separate action); `--drop-state` starts it empty.
    Rekeyed,
    /// What an operator's state means changed (its type, options or input columns): refused
    /// unless `--drop-state` starts it empty.
    StateChanged,
    /// A sink's delivery protocol changed under exactly-once: its pending transactions could
    /// not be finished.
    DeliveryChanged,
    /// An action names an operator that is not there.
    UnknownOperator,
}

impl Rule {
    /// The rule in the user's words, as docs/fault-tolerance.md names it.
    pub fn says(self) -> &'static str {
        match self {
            Rule::NewState => "a stateful operator added starts empty only when allowed",
            Rule::RemovedState => "a stateful operator removed needs its state dropped",
            Rule::Rekeyed => "a key, the key hash or the state shard count may not change",
            Rule::StateChanged => "what a state means may not change",
            Rule::DeliveryChanged => "a sink's delivery protocol may not change under exactly-once",
            Rule::UnknownOperator => "an action must name an operator that is there",
        }
    }
}

/// What a restore does with one operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    /// A stateful operator whose state is restored.
    Kept,
    /// A stateless operator in both (changed or not).
    Stateless,
    /// A stateless operator only in the job.
    Added,
    /// A stateless operator only in the checkpoint.
    Removed,
    /// A stateful operator that starts empty: new and allowed, or its state dropped on request.
    StartsEmpty,
    /// A stateful operator of the checkpoint removed from the job, its state dropped on request.
    Dropped,
    /// The restore is refused because of this operator.
    Refused {
        /// The rule it breaks.
        rule: Rule,
    },
}

/// One line of an [`EvolutionReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorChange {
    /// The operator's id in the job (in the checkpoint for one that is removed).
    pub operator_id: OperatorId,
    /// Its id in the checkpoint where `--map-operator` gave it another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was: Option<OperatorId>,
    /// Its type.
    pub type_name: String,
    /// What the restore does with it.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub detail: String,
}

/// The verdict on every operator of a checkpoint and of the job restoring it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvolutionReport {
    /// One line per operator: the job's in its order, then those only in the checkpoint.
    pub operators: Vec<OperatorChange>,
}

impl EvolutionReport {
    /// The lines that refuse the restore.
    pub fn refusals(&self) -> impl Iterator<Item = &OperatorChange> {
        self.operators
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Refused { .. }))
    }

    /// Whether the restore may go ahead.
    pub fn allowed(&self) -> bool {
        self.refusals().next().is_none()
    }

    /// The checkpoint's operator whose state the job's operator `id` restores (`id` itself
    /// unless mapped), `None` for one that starts empty or keeps no state.
    pub fn restores_from(&self, id: &OperatorId) -> Option<&OperatorId> {
        self.operators
            .iter()
            .find(|c| &c.operator_id == id && c.verdict == Verdict::Kept)
            .map(|c| c.was.as_ref().unwrap_or(&c.operator_id))
    }
}

impl EvolutionReport {
    /// Every job operator that restores a checkpoint operator's state, by that checkpoint
    /// operator (old -> new; the same id unless mapped).
    pub fn restored(&self) -> BTreeMap<OperatorId, OperatorId> {
        self.operators
            .iter()
            .filter(|c| c.verdict == Verdict::Kept)
            .map(|c| {
                let from = c.was.as_ref().unwrap_or(&c.operator_id);
                (from.clone(), c.operator_id.clone())
            })
            .collect()
    }
}

impl fmt::Display for EvolutionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.operators {
            let verdict = match &c.verdict {
                Verdict::Kept => "keep",
                Verdict::Stateless => "same",
                Verdict::Added => "add",
                Verdict::Removed => "remove",
                Verdict::StartsEmpty => "empty",
                Verdict::Dropped => "drop",
                Verdict::Refused { .. } => "REFUSE",
            };
            let was = c
                .was
                .as_ref()
                .map(|w| format!(" (was {w})"))
                .unwrap_or_default();
            writeln!(
                f,
                "{verdict:<7}{}{was} [{}]: {}",
                c.operator_id, c.type_name, c.detail
            )?;
        }
        Ok(())
    }
}

/// The verdict on every operator when the job of `new` profiles restores a checkpoint of the
/// job of `old` profiles, with `actions`; `exactly_once` when the job's semantic mode is.
pub fn compare(
    old: &[OperatorProfile],
    new: &[OperatorProfile],
    actions: &EvolutionActions,
    exactly_once: bool,
) -> EvolutionReport {
    let mut lines = Vec::new();
    let new_ids: BTreeSet<&OperatorId> = new.iter().map(|p| &p.operator_id).collect();
    let old_ids: BTreeSet<&OperatorId> = old.iter().map(|p| &p.operator_id).collect();
    // The checkpoint's operators under the ids they have in the job.
    let mut renamed: BTreeMap<&OperatorId, &OperatorId> = BTreeMap::new();
    for (from, to) in &actions.map_operator {
        if !old_ids.contains(from) {
            lines.push(unknown(from, "--map-operator", "the checkpoint"));
        } else if !new_ids.contains(to) {
            lines.push(unknown(to, "--map-operator", "the job"));
        } else {
            renamed.insert(to, from);
        }
    }
    let mapped_away: BTreeSet<&OperatorId> = renamed.values().copied().collect();
    let by_id: BTreeMap<&OperatorId, &OperatorProfile> = old
        .iter()
        .filter(|p| !mapped_away.contains(&p.operator_id))
        .map(|p| (&p.operator_id, p))
        .chain(renamed.iter().filter_map(|(to, from)| {
            old.iter()
                .find(|p| &p.operator_id == *from)
                .map(|p| (*to, p))
        }))
        .collect();
    for n in new {
        let was = renamed.get(&n.operator_id).map(|f| (*f).clone());
        let (verdict, detail) = match by_id.get(&n.operator_id) {
            Some(o) => both(o, n, actions, exactly_once),
            None => added(n, actions),
        };
        lines.push(OperatorChange {
            operator_id: n.operator_id.clone(),
            was,
            type_name: n.type_name.clone(),
            verdict,
            detail,
        });
    }
    for o in old
        .iter()
        .filter(|o| !new_ids.contains(&o.operator_id) && !mapped_away.contains(&o.operator_id))
    {
        let (verdict, detail) = removed(o, actions);
        lines.push(OperatorChange {
            operator_id: o.operator_id.clone(),
            was: None,
            type_name: o.type_name.clone(),
            verdict,
            detail,
        });
    }
    for id in &actions.drop_state {
        if !old_ids.contains(id) && !renamed.contains_key(id) {
            lines.push(unknown(id, "--drop-state", "the checkpoint"));
        }
    }
    EvolutionReport { operators: lines }
}

/// The verdict on an operator in the checkpoint (`o`) and in the job (`n`).
fn both(
    o: &OperatorProfile,
    n: &OperatorProfile,
    actions: &EvolutionActions,
    exactly_once: bool,
) -> (Verdict, String) {
    if !o.stateful && !n.stateful {
        let detail = if o.state_signature == n.state_signature {
            "unchanged"
        } else {
            "stateless, changed"
        };
        return (Verdict::Stateless, detail.to_owned());
    }
    let id = &n.operator_id;
    if n.kind == NodeKind::Sink && exactly_once && o.delivery != n.delivery {
        return refused(
            Rule::DeliveryChanged,
            format!(
                "its delivery was {} and is now {}",
                o.delivery.as_deref().unwrap_or("none"),
                n.delivery.as_deref().unwrap_or("none")
            ),
        );
    }
    let drop = actions.drop_state.contains(id)
        || actions
            .map_operator
            .iter()
            .any(|(from, to)| to == id && actions.drop_state.contains(from));
    if drop {
        return (
            Verdict::StartsEmpty,
            "its state is dropped on request: it starts empty".to_owned(),
        );
    }
    if !o.stateful {
        return added(n, actions);
    }
    if !n.stateful {
        return (
            Verdict::Dropped,
            "keeps no state any more: its state is not restored".to_owned(),
        );
    }
    if o.keys != n.keys || o.key_hash != n.key_hash || o.state_shard_count != n.state_shard_count {
        return refused(
            Rule::Rekeyed,
            format!(
                "keyed by {} with {} shards, now by {} with {}; --drop-state {id} starts it empty",
                show_keys(&o.keys),
                show_count(o.state_shard_count),
                show_keys(&n.keys),
                show_count(n.state_shard_count)
            ),
        );
    }
    if o.type_name != n.type_name || o.state_signature != n.state_signature {
        let what = if o.type_name != n.type_name {
            format!("it was a {} and is now a {}", o.type_name, n.type_name)
        } else {
            "its options or input columns changed".to_owned()
        };
        return refused(
            Rule::StateChanged,
            format!(
                "{what}, so its state would be read wrongly; --drop-state {id} starts it empty"
            ),
        );
    }
    (Verdict::Kept, "state kept".to_owned())
}

/// The verdict on an operator only in the job.
fn added(n: &OperatorProfile, actions: &EvolutionActions) -> (Verdict, String) {
    if !n.stateful {
        (Verdict::Added, "new, keeps no state".to_owned())
    } else if actions.allow_new_state {
        (
            Verdict::StartsEmpty,
            "new: starts empty (--allow-new-state)".to_owned(),
        )
    } else {
        refused(
            Rule::NewState,
            "new and keeps state; --allow-new-state starts it empty".to_owned(),
        )
    }
}

/// The verdict on an operator only in the checkpoint.
fn removed(o: &OperatorProfile, actions: &EvolutionActions) -> (Verdict, String) {
    if !o.stateful {
        (Verdict::Removed, "removed, kept no state".to_owned())
    } else if actions.drop_state.contains(&o.operator_id) {
        (
            Verdict::Dropped,
            "removed: its state is dropped (--drop-state)".to_owned(),
        )
    } else {
        refused(
            Rule::RemovedState,
            format!(
                "removed, and the checkpoint holds its state; --drop-state {} drops it, \
                 --map-operator {}=NEW gives it to an operator of another id",
                o.operator_id, o.operator_id
            ),
        )
    }
}

fn refused(rule: Rule, detail: String) -> (Verdict, String) {
    (Verdict::Refused { rule }, detail)
}

fn unknown(id: &OperatorId, action: &str, place: &str) -> OperatorChange {
    OperatorChange {
        operator_id: id.clone(),
        was: None,
        type_name: "?".to_owned(),
        verdict: Verdict::Refused {
            rule: Rule::UnknownOperator,
        },
        detail: format!("{action} names `{id}`, which {place} does not have"),
    }
}

fn show_keys(keys: &[Vec<String>]) -> String {
    if keys.is_empty() {
        return "nothing".to_owned();
    }
    keys.iter()
        .map(|k| format!("({})", k.join(", ")))
        .collect::<Vec<_>>()
        .join(" and ")
}

fn show_count(count: Option<u32>) -> String {
    count.map_or("no".to_owned(), |c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(id: &str, type_name: &str, stateful: bool, signature: &str) -> OperatorProfile {
        OperatorProfile {
            operator_id: OperatorId::new(id),
            kind: NodeKind::Operator,
            type_name: type_name.to_owned(),
            stateful,
            keys: if stateful {
                vec![vec!["auction".to_owned()]]
            } else {
                Vec::new()
            },
            key_hash: stateful.then(|| "weir-xxh3-v1".to_owned()),
            state_shard_count: stateful.then_some(128),
            state_signature: signature.to_owned(),
            delivery: None,
        }
    }

    fn verdicts(report: &EvolutionReport) -> Vec<(String, Verdict)> {
        report
            .operators
            .iter()
            .map(|c| (c.operator_id.to_string(), c.verdict.clone()))
            .collect()
    }

    fn refuse(rule: Rule) -> Verdict {
        Verdict::Refused { rule }
    }

    #[test]
    fn a_filter_added_before_a_window_keeps_the_window_state() {
        let old = [
            profile("w", "window", true, "a"),
            profile("p", "project", false, "x"),
        ];
        let new = [
            profile("f", "filter", false, "y"),
            profile("w", "window", true, "a"),
            profile("p", "project", false, "z"),
        ];
        let report = compare(&old, &new, &EvolutionActions::default(), true);
        assert!(report.allowed(), "{report}");
        assert_eq!(
            verdicts(&report),
            [
                ("f".to_owned(), Verdict::Added),
                ("w".to_owned(), Verdict::Kept),
                ("p".to_owned(), Verdict::Stateless),
            ]
        );
        assert_eq!(
            report.restores_from(&OperatorId::new("w")),
            Some(&OperatorId::new("w"))
        );
    }

    #[test]
    fn a_changed_state_is_refused_until_dropped_and_new_state_until_allowed() {
        let old = [profile("w", "window", true, "a")];
        let new = [
            profile("w", "window", true, "b"),
            profile("t", "top_n", true, "c"),
        ];
        let report = compare(&old, &new, &EvolutionActions::default(), false);
        assert_eq!(
            verdicts(&report),
            [
                ("w".to_owned(), refuse(Rule::StateChanged)),
                ("t".to_owned(), refuse(Rule::NewState)),
            ]
        );
        assert!(report.to_string().contains("--drop-state w"), "{report}");
        let actions = EvolutionActions {
            allow_new_state: true,
            drop_state: [OperatorId::new("w")].into(),
            ..Default::default()
        };
        let report = compare(&old, &new, &actions, false);
        assert!(report.allowed(), "{report}");
        assert_eq!(report.restores_from(&OperatorId::new("w")), None);
    }

    #[test]
    fn a_removed_stateful_operator_needs_its_state_dropped_or_mapped() {
        let old = [
            profile("old_w", "window", true, "a"),
            profile("f", "filter", false, "x"),
        ];
        let new = [profile("new_w", "window", true, "a")];
        let none = compare(&old, &new, &EvolutionActions::default(), false);
        assert_eq!(
            verdicts(&none),
            [
                ("new_w".to_owned(), refuse(Rule::NewState)),
                ("old_w".to_owned(), refuse(Rule::RemovedState)),
                ("f".to_owned(), Verdict::Removed),
            ]
        );
        let mapped = EvolutionActions {
            map_operator: [(OperatorId::new("old_w"), OperatorId::new("new_w"))].into(),
            ..Default::default()
        };
        let report = compare(&old, &new, &mapped, false);
        assert!(report.allowed(), "{report}");
        assert_eq!(
            report.restores_from(&OperatorId::new("new_w")),
            Some(&OperatorId::new("old_w"))
        );
        let dropped = EvolutionActions {
            allow_new_state: true,
            drop_state: [OperatorId::new("old_w")].into(),
            ..Default::default()
        };
        assert!(compare(&old, &new, &dropped, false).allowed());
    }

    #[test]
    fn keys_shards_and_delivery_changes_are_refused_and_unknown_names_too() {
        let old = [profile("w", "window", true, "a")];
        let mut rekeyed = profile("w", "window", true, "a");
        rekeyed.state_shard_count = Some(256);
        let report = compare(&old, &[rekeyed], &EvolutionActions::default(), false);
        assert_eq!(verdicts(&report), [("w".to_owned(), refuse(Rule::Rekeyed))]);

        let mut sink = profile("s", "kafka", true, "k");
        sink.kind = NodeKind::Sink;
        sink.keys.clear();
        sink.key_hash = None;
        sink.state_shard_count = None;
        sink.delivery = Some("two-phase-commit".to_owned());
        let mut at_least_once = sink.clone();
        at_least_once.delivery = Some("at-least-once".to_owned());
        let strict = compare(
            std::slice::from_ref(&sink),
            std::slice::from_ref(&at_least_once),
            &EvolutionActions::default(),
            true,
        );
        assert_eq!(
            verdicts(&strict),
            [("s".to_owned(), refuse(Rule::DeliveryChanged))]
        );
        let loose = compare(
            &[sink],
            &[at_least_once],
            &EvolutionActions::default(),
            false,
        );
        assert!(loose.allowed(), "{loose}");

        let typo = EvolutionActions {
            drop_state: [OperatorId::new("nope")].into(),
            ..Default::default()
        };
        let report = compare(&old, &old, &typo, false);
        assert_eq!(
            verdicts(&report),
            [
                ("w".to_owned(), Verdict::Kept),
                ("nope".to_owned(), refuse(Rule::UnknownOperator)),
            ]
        );
    }
}
