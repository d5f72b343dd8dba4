//! Where each part of a compiled job came from in its script: the job spec's JSON paths of the
//! sources and sinks a `CREATE TABLE` became (the table, its connector, each `WITH` option, its
//! watermark and computed columns), with their SQL positions. An error of the deep build names
//! a JSON path (`sources[0].options.format`); [`SpecPositions::locate`] turns it back into the
//! line and column of the option the user wrote.

use crate::error::Position;
use std::collections::BTreeMap;

/// A place in the script a JSON path of the compiled spec comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlOrigin {
    /// Where it is.
    pub position: Position,
    /// What it is, as the script says it: ``option 'format' of table `bids` ``.
    pub what: String,
}

/// The SQL origin of the JSON paths of a compiled job spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecPositions(BTreeMap<String, SqlOrigin>);

impl SpecPositions {
    /// Records that `path` of the spec comes from `what` at `position`.
    pub(crate) fn insert(&mut self, path: String, position: Position, what: String) {
        self.0.insert(path, SqlOrigin { position, what });
    }

    /// The origin of `path`, or of the nearest enclosing path that has one
    /// (`sources[0].options.path[2]` falls back to `sources[0].options.path`, then
    /// `sources[0].options`, then `sources[0]`).
    pub fn locate(&self, path: &str) -> Option<&SqlOrigin> {
        let mut path = path;
        loop {
            if let Some(origin) = self.0.get(path) {
                return Some(origin);
            }
            let cut = path.rfind(['.', '['])?;
            path = &path[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_falls_back_to_the_nearest_enclosing_origin() {
        let mut positions = SpecPositions::default();
        let at = |line, column| Position { line, column };
        positions.insert("sources[0]".into(), at(1, 1), "table `bids`".into());
        positions.insert(
            "sources[0].options.format".into(),
            at(9, 70),
            "option 'format' of table `bids`".into(),
        );
        let found = |path| positions.locate(path).map(|o| o.position);
        assert_eq!(found("sources[0].options.format"), Some(at(9, 70)));
        assert_eq!(found("sources[0].options.path"), Some(at(1, 1)));
        assert_eq!(found("sources[0].options.format.x[3]"), Some(at(9, 70)));
        assert_eq!(found("sources[1].options.format"), None);
        assert_eq!(found("sinks[0]"), None);
    }
}
