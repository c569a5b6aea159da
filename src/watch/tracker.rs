//! Suspects from one window to the next: which appeared, which stayed
//! long enough to say so once more, which cleared. Pure: the windows'
//! suspects in, the changes out.

use std::collections::BTreeMap;

use serde::Serialize;

/// Windows in a row after which a suspect is said to persist (once).
pub const PERSISTS_AFTER: u64 = 3;

/// What happened to a suspect at a window's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// Suspected in this window, not in the one before.
    Appeared,
    /// Suspected in [`PERSISTS_AFTER`] windows in a row.
    Persists,
    /// Suspected in the window before, not in this one.
    Cleared,
}

/// A suspect as one window named it: its label (how it is known from one
/// window to the next) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub label: String,
    pub evidence: String,
}

/// One change, with the windows the suspect has been (or was) suspected in a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    pub change: Change,
    pub suspect: Named,
    pub windows: u64,
}

#[derive(Debug, Default)]
pub struct Tracker {
    /// The suspects of the last window judged, by label: since which window, and how many in a row.
    open: BTreeMap<String, (Named, u64)>,
}

impl Tracker {
    /// Takes in one window's suspects; the changes, cleared ones first.
    pub fn window(&mut self, suspects: Vec<Named>) -> Vec<Changed> {
        let mut now: BTreeMap<String, (Named, u64)> = BTreeMap::new();
        let mut changes = Vec::new();
        for named in suspects {
            let streak = self.open.get(&named.label).map_or(1, |(_, streak)| streak + 1);
            let change = match streak {
                1 => Some(Change::Appeared),
                PERSISTS_AFTER => Some(Change::Persists),
                _ => None,
            };
            if let Some(change) = change {
                changes.push(Changed { change, suspect: named.clone(), windows: streak });
            }
            now.insert(named.label.clone(), (named, streak));
        }
        let cleared = self.open.iter().filter(|(label, _)| !now.contains_key(*label));
        let cleared: Vec<Changed> = cleared
            .map(|(_, (named, streak))| Changed { change: Change::Cleared, suspect: named.clone(), windows: *streak })
            .collect();
        self.open = now;
        cleared.into_iter().chain(changes).collect()
    }

    /// The suspects of the last window judged, by label.
    pub fn open(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(label: &str) -> Named {
        Named { label: label.into(), evidence: format!("{label} failed") }
    }

    fn changes(tracker: &mut Tracker, labels: &[&str]) -> Vec<(Change, String, u64)> {
        let changed = tracker.window(labels.iter().map(|l| named(l)).collect());
        changed.into_iter().map(|c| (c.change, c.suspect.label, c.windows)).collect()
    }

    #[test]
    fn a_suspect_appears_persists_once_and_clears() {
        let mut t = Tracker::default();
        assert_eq!(changes(&mut t, &[]), []);
        assert_eq!(
            changes(&mut t, &["uplink leaf1 ↔ spine1"]),
            [(Change::Appeared, "uplink leaf1 ↔ spine1".into(), 1)]
        );
        assert_eq!(changes(&mut t, &["uplink leaf1 ↔ spine1"]), []);
        assert_eq!(
            changes(&mut t, &["uplink leaf1 ↔ spine1"]),
            [(Change::Persists, "uplink leaf1 ↔ spine1".into(), 3)]
        );
        assert_eq!(changes(&mut t, &["uplink leaf1 ↔ spine1"]), [], "said once");
        assert_eq!(t.open().collect::<Vec<_>>(), ["uplink leaf1 ↔ spine1"]);
        assert_eq!(
            changes(&mut t, &["host h2 (rank 1)"]),
            [(Change::Cleared, "uplink leaf1 ↔ spine1".into(), 4), (Change::Appeared, "host h2 (rank 1)".into(), 1)]
        );
        assert_eq!(changes(&mut t, &[]), [(Change::Cleared, "host h2 (rank 1)".into(), 1)]);
        assert_eq!(t.open().count(), 0);
    }

    #[test]
    fn a_suspect_back_after_a_clean_window_appears_again() {
        let mut t = Tracker::default();
        changes(&mut t, &["link h1 – h3"]);
        changes(&mut t, &["link h1 – h3"]);
        assert_eq!(changes(&mut t, &[]), [(Change::Cleared, "link h1 – h3".into(), 2)]);
        assert_eq!(changes(&mut t, &["link h1 – h3"]), [(Change::Appeared, "link h1 – h3".into(), 1)]);
    }
}
