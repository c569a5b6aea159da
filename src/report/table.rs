//! A table as plain text cells: a title, a header and rows, built once from
//! the result and drawn by the terminal, Markdown and HTML writers alike.

pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: String, header: &[&str]) -> Table {
        Table { title, header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }
}
