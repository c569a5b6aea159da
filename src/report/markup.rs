//! Escaping text for the XML and HTML writers (junit.xml, report.html).

/// Text for XML and HTML, attributes included.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
