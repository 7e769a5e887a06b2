//! The page's building blocks: sections, tables (sortable by any column), figures with their
//! numbers beside them, and the one document around them with its inline stylesheet and
//! script. Nothing here reads results; `pages` decides what a page shows.

use super::charts::escape;
use std::fmt::Write as _;

/// A whole page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The document's title and first heading.
    pub title: String,
    /// One line under the heading (what was measured, when).
    pub subtitle: String,
    /// The sections, in order.
    pub sections: Vec<Section>,
}

/// One section: a heading and its HTML.
#[derive(Debug, Clone)]
pub struct Section {
    /// The anchor (`#id`), also used by tests to find the section.
    pub id: String,
    /// The heading.
    pub heading: String,
    /// Already-rendered HTML.
    pub body: String,
}

/// A table cell: its text, and the number it sorts by when the column holds numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// What is shown.
    pub text: String,
    /// The value sorted by; text cells sort by their text.
    pub sort: Option<f64>,
}

impl Cell {
    /// A text cell.
    pub fn text(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            sort: None,
        }
    }

    /// A numeric cell shown as `text`.
    pub fn number(text: impl Into<String>, value: f64) -> Cell {
        Cell {
            text: text.into(),
            sort: Some(value),
        }
    }
}

/// A table; `sortable` tables sort by a column when its header is clicked (again: reversed).
pub fn table(headers: &[&str], rows: &[Vec<Cell>], sortable: bool) -> String {
    let mut out = String::new();
    let class = if sortable { " class=\"sortable\"" } else { "" };
    let _ = write!(out, "<div class=\"scroll\"><table{class}><thead><tr>");
    for header in headers {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            match cell.sort {
                Some(value) if value.is_finite() => {
                    let _ = write!(
                        out,
                        "<td class=\"num\" data-sort=\"{value}\">{}</td>",
                        escape(&cell.text)
                    );
                }
                _ => {
                    // Long text (an error message) wraps instead of widening the table.
                    let class = if cell.text.chars().count() > 60 {
                        " class=\"wrap\""
                    } else {
                        ""
                    };
                    let _ = write!(out, "<td{class}>{}</td>", escape(&cell.text));
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    out
}

/// A chart with its caption and, folded under it, the table of the numbers it draws. A chart
/// that could not be drawn leaves a line saying why, and the numbers still show.
pub fn figure(chart: Result<String, String>, caption: &str, numbers: &str) -> String {
    let picture = match chart {
        Ok(svg) => svg,
        Err(why) => format!("<p class=\"note\">{}</p>", escape(&why)),
    };
    format!(
        "<figure>{picture}<figcaption>{}</figcaption><details><summary>Numbers</summary>{numbers}</details></figure>",
        escape(caption)
    )
}

/// A paragraph of text.
pub fn paragraph(text: &str) -> String {
    format!("<p>{}</p>", escape(text))
}

/// A list of `key = value` settings.
pub fn settings(pairs: &[(String, String)]) -> String {
    let mut out = String::from("<dl class=\"settings\">");
    for (key, value) in pairs {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(key), escape(value));
    }
    out.push_str("</dl>");
    out
}

/// A link to a file beside the page (a relative path; nothing outside the folder).
pub fn file_link(path: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(path), escape(text))
}

/// The document: inline stylesheet (screen, phone, print) and the table-sorting script.
pub fn render(page: &Page) -> String {
    // A section with nothing to say (no thresholds given) is left out, with its link.
    let sections = || {
        page.sections
            .iter()
            .filter(|section| !section.body.is_empty())
    };
    let mut nav = String::new();
    for section in sections() {
        let _ = write!(
            nav,
            "<a href=\"#{}\">{}</a> ",
            escape(&section.id),
            escape(&section.heading)
        );
    }
    let mut body = String::new();
    for section in sections() {
        let _ = write!(
            body,
            "<section id=\"{}\"><h2>{}</h2>{}</section>",
            escape(&section.id),
            escape(&section.heading),
            section.body
        );
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"generator\" content=\"grpclab {version}\">\
<title>{title}</title><style>{STYLE}</style></head><body>\
<header><h1>{title}</h1><p class=\"subtitle\">{subtitle}</p><nav>{nav}</nav></header>\
<main>{body}</main><footer>grpclab {version} report: self-contained, no network needed.</footer>\
<script>{SCRIPT}</script></body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
        title = escape(&page.title),
        subtitle = escape(&page.subtitle),
    )
}

/// The page's whole stylesheet: readable from a phone to a wide screen, and printable.
const STYLE: &str = "\
:root{color-scheme:light;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d1d1f;background:#fafafa}\
body{margin:0 auto;max-width:1320px;padding:0 16px 32px;line-height:1.45}\
h1{font-size:1.6rem;margin:20px 0 4px}h2{font-size:1.25rem;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
.subtitle{color:#555;margin:0 0 8px}nav a{margin-right:10px;font-size:.9rem;white-space:nowrap}\
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:8px 0;font-size:.85rem;background:#fff}\
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums}td.wrap{white-space:normal;min-width:24em}\
table.sortable th{cursor:pointer;user-select:none}table.sortable th:after{content:' \\2195';color:#aaa}\
figure{margin:12px 0 20px;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px}\
figure svg{width:100%;height:auto;display:block;margin:0 auto}figcaption{font-size:.9rem;color:#444;margin:4px 0}\
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}\
dl.settings{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:.85rem}\
dl.settings dt{font-family:ui-monospace,monospace;color:#444}dl.settings dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}\
.note{color:#8a5a00}footer{margin-top:32px;color:#777;font-size:.8rem}\
@media print{nav,details summary{display:none}details{display:block}figure{break-inside:avoid;border:none}body{max-width:none}}\
";

/// Sorts a `table.sortable` by the clicked column: numbers by `data-sort`, text by its text.
const SCRIPT: &str = "\
document.querySelectorAll('table.sortable').forEach(function(table){\
table.querySelectorAll('th').forEach(function(th,column){var up=false;\
th.addEventListener('click',function(){up=!up;var body=table.tBodies[0];\
var rows=Array.prototype.slice.call(body.rows);\
rows.sort(function(a,b){var x=a.cells[column],y=b.cells[column];\
var p=x&&x.dataset.sort!==undefined?parseFloat(x.dataset.sort):NaN,q=y&&y.dataset.sort!==undefined?parseFloat(y.dataset.sort):NaN;\
var order=(!isNaN(p)&&!isNaN(q))?p-q:(isNaN(p)&&!isNaN(q)?1:(!isNaN(p)&&isNaN(q)?-1:(x?x.textContent:'').localeCompare(y?y.textContent:'')));\
return up?order:-order;});rows.forEach(function(row){body.appendChild(row);});});});});\
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_escape_text_and_carry_sort_values() {
        let html = table(
            &["name", "req/s"],
            &[vec![Cell::text("<lab>"), Cell::number("1,000", 1000.0)]],
            true,
        );
        assert!(html.contains("<td>&lt;lab&gt;</td>"));
        assert!(html.contains("data-sort=\"1000\">1,000</td>"));
        assert!(html.contains("class=\"sortable\""));
    }

    #[test]
    fn the_page_needs_nothing_from_the_network() {
        let page = Page {
            title: "t".into(),
            subtitle: "s".into(),
            sections: vec![Section {
                id: "a".into(),
                heading: "A".into(),
                body: paragraph("x"),
            }],
        };
        let html = render(&page);
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(html.contains("<section id=\"a\"><h2>A</h2><p>x</p></section>"));
    }
}
