//! Finding the line of a field in the scenario text, so that errors found
//! after parsing (validation, planning) still point at `file:line`.

use std::path::{Path, PathBuf};

/// Where in the scenario a problem is: a key of `[run]`, of one `[[group]]`,
/// or at the top level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub section: Section,
    pub key: &'static str,
}

/// A bad value of one key of a scenario table, and why; the caller names
/// the table (`Field`) and the line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct BadKey {
    pub key: &'static str,
    pub reason: String,
}

impl BadKey {
    pub fn new(key: &'static str, reason: String) -> BadKey {
        BadKey { key, reason }
    }

    /// This key's error, placed in `section` of the scenario.
    pub fn within(self, section: Section) -> BadField {
        BadField { field: Field { section, key: self.key }, reason: self.reason }
    }
}

/// A field of the scenario that validation or planning refuses, and why
/// (with what would be valid). Shown alone it is "`key`: reason", as where
/// no scenario text is at hand (a worker's plan); `Source::explain` adds
/// the file, line and table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{}`: {reason}", field.key)]
pub struct BadField {
    pub field: Field,
    pub reason: String,
}

impl BadField {
    pub fn new(field: Field, reason: impl Into<String>) -> BadField {
        BadField { field, reason: reason.into() }
    }
}

/// Which table of the scenario file a field is in (named apart from
/// `report::tables::table::Table`, a rendered table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Section {
    Top,
    Run,
    Check,
    Group(usize),
    /// A group's `[group.rdma]` table.
    GroupRdma(usize),
    Stress(usize),
    Sweep,
    Congestion,
}

impl Field {
    pub fn top(key: &'static str) -> Field {
        Field { section: Section::Top, key }
    }
    pub fn run(key: &'static str) -> Field {
        Field { section: Section::Run, key }
    }
    pub fn check(key: &'static str) -> Field {
        Field { section: Section::Check, key }
    }
    pub fn group(index: usize, key: &'static str) -> Field {
        Field { section: Section::Group(index), key }
    }
    pub fn group_rdma(index: usize, key: &'static str) -> Field {
        Field { section: Section::GroupRdma(index), key }
    }
    pub fn sweep(key: &'static str) -> Field {
        Field { section: Section::Sweep, key }
    }
    pub fn stress(index: usize, key: &'static str) -> Field {
        Field { section: Section::Stress(index), key }
    }
    pub fn congestion(key: &'static str) -> Field {
        Field { section: Section::Congestion, key }
    }
}

/// The scenario's text, kept to describe fields by file and line.
#[derive(Clone, Debug)]
pub struct Source {
    path: PathBuf,
    doc: Option<toml_edit::ImDocument<String>>,
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(path: &Path, text: &str) -> Source {
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Source { path: path.to_path_buf(), doc: toml_edit::ImDocument::parse(text.to_string()).ok(), line_starts }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let column = offset - self.line_starts[line.saturating_sub(1)] + 1;
        (line.max(1), column)
    }

    /// Whether the file gives `field` itself (rather than leaving it to its
    /// default). Text this reader could not parse counts as giving it: the
    /// file's value is then kept, as it always was.
    pub fn sets(&self, field: &Field) -> bool {
        match self.table(&field.section) {
            Some(table) => table.contains_key(field.key),
            None => self.doc.is_none(),
        }
    }

    /// `file:line: group "name": field `key`: message`.
    pub fn describe(&self, field: &Field, message: &str) -> String {
        let line = self.line_of(field).unwrap_or(1);
        let place = match field.section {
            Section::Top => String::new(),
            Section::Run => "[run]: ".to_string(),
            Section::Check => "[check]: ".to_string(),
            Section::Group(i) | Section::GroupRdma(i) => match self.group_name(i) {
                // Escaped: the name is the file's text, bound for a terminal.
                Some(name) => format!("group \"{}\": ", name.escape_debug()),
                None => format!("group {i}: "),
            },
            Section::Stress(i) => format!("stress {i}: "),
            Section::Sweep => "[sweep]: ".to_string(),
            Section::Congestion => "[congestion]: ".to_string(),
        };
        let within = if let Section::GroupRdma(_) = field.section { "rdma." } else { "" };
        format!("{}:{line}: {place}field `{within}{}`: {message}", self.path.display(), field.key)
    }

    /// `bad` as `describe` words it: its file, line, table and field.
    pub fn explain(&self, bad: &BadField) -> String {
        self.describe(&bad.field, &bad.reason)
    }

    fn table(&self, table: &Section) -> Option<&toml_edit::Table> {
        let doc = self.doc.as_ref()?;
        match table {
            Section::Top => Some(doc.as_table()),
            Section::Run => doc.get("run")?.as_table(),
            Section::Check => doc.get("check")?.as_table(),
            Section::Group(i) => doc.get("group")?.as_array_of_tables()?.get(*i),
            Section::GroupRdma(i) => self.table(&Section::Group(*i))?.get("rdma")?.as_table(),
            Section::Stress(i) => doc.get("stress")?.as_array_of_tables()?.get(*i),
            Section::Sweep => doc.get("sweep")?.as_table(),
            Section::Congestion => doc.get("congestion")?.as_table(),
        }
    }

    /// A key of group `index`'s `[group.rdma]` table as written (`"read"`),
    /// if the table gives it.
    pub fn group_rdma_value(&self, index: usize, key: &str) -> Option<String> {
        let item = self.table(&Section::Group(index))?.get("rdma")?.as_table_like()?.get(key)?;
        Some(item.as_value().map_or_else(|| item.to_string(), |v| v.to_string()).trim().to_string())
    }

    /// How many `[[group]]` tables the text has.
    pub fn groups(&self) -> usize {
        self.doc
            .as_ref()
            .and_then(|doc| doc.get("group")?.as_array_of_tables())
            .map_or(0, toml_edit::ArrayOfTables::len)
    }

    fn group_name(&self, index: usize) -> Option<&str> {
        self.table(&Section::Group(index))?.get("name")?.as_str()
    }

    fn line_of(&self, field: &Field) -> Option<usize> {
        let Some(table) = self.table(&field.section) else {
            // An inline `rdma = { … }`: the line of the group's `rdma` key.
            let Section::GroupRdma(i) = field.section else { return None };
            return self.line_of(&Field::group(i, "rdma"));
        };
        let span = table
            .key(field.key)
            .and_then(toml_edit::Key::span)
            .or_else(|| table.span())
            .or_else(|| self.top_level_span(field))?;
        Some(self.line_col(span.start).0)
    }

    /// A key missing from its table points at the table's header.
    fn top_level_span(&self, field: &Field) -> Option<std::ops::Range<usize>> {
        let doc = self.doc.as_ref()?;
        match field.section {
            Section::Group(_) | Section::GroupRdma(_) => doc.as_table().key("group")?.span(),
            Section::Stress(_) => doc.as_table().key("stress")?.span(),
            Section::Sweep => doc.as_table().key("sweep")?.span(),
            Section::Run => doc.as_table().key("run")?.span(),
            Section::Check => doc.as_table().key("check")?.span(),
            Section::Congestion => doc.as_table().key("congestion")?.span(),
            Section::Top => Some(0..0),
        }
    }
}
