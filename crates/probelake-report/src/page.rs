//! The page: `assets/report.html` with its style, script and data pasted in, so that the file
//! needs nothing else. A Content-Security-Policy forbids the page every request: it can load no
//! script, style, font or image from anywhere, nor connect anywhere.

use crate::model::ReportData;

const TEMPLATE: &str = include_str!("../assets/report.html");
const STYLE: [&str; 2] = [include_str!("../assets/report.css"), include_str!("../assets/vendor/uPlot.min.css")];
const SCRIPT: [&str; 2] = [include_str!("../assets/vendor/uPlot.iife.min.js"), include_str!("../assets/report.js")];

/// The page's policy: inline script and style only, images as `data:` URLs, nothing fetched.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; img-src data:; font-src 'none'; connect-src 'none'; base-uri 'none'; \
     form-action 'none'";

/// The page of `data`, as one HTML document.
///
/// ```
/// # use probelake_report::{page, ReportData};
/// # fn demo(data: &ReportData) -> Result<(), serde_json::Error> {
/// let html = page(data)?;
/// assert!(html.contains("Content-Security-Policy"));
/// # Ok(()) }
/// ```
pub fn page(data: &ReportData) -> Result<String, serde_json::Error> {
    // `<` only ever stands inside a JSON string: as `\u003c` it cannot end the script element.
    let json = serde_json::to_string(data)?.replace('<', "\\u003c");
    let fills: [(&str, String); 5] = [
        ("probelake:csp", CONTENT_SECURITY_POLICY.to_string()),
        ("probelake:title", escape_html(&data.title)),
        ("/*probelake:style*/", STYLE.join("\n")),
        ("/*probelake:script*/", SCRIPT.join("\n")),
        ("\"probelake:data\"", json),
    ];
    Ok(fill(TEMPLATE, &fills))
}

/// `template` with each placeholder replaced, in one pass, so that text pasted for one
/// placeholder is never searched for another.
fn fill(template: &str, fills: &[(&str, String)]) -> String {
    let size = template.len() + fills.iter().map(|(_, text)| text.len()).sum::<usize>();
    let mut out = String::with_capacity(size);
    let mut rest = template;
    while let Some((at, (mark, text))) =
        fills.iter().filter_map(|f| rest.find(f.0).map(|at| (at, f))).min_by_key(|(at, _)| *at)
    {
        out.push_str(&rest[..at]);
        out.push_str(text);
        rest = &rest[at + mark.len()..];
    }
    out.push_str(rest);
    out
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_in_the_template_once_and_nothing_pasted_is_searched_again() {
        for mark in
            ["probelake:csp", "probelake:title", "/*probelake:style*/", "/*probelake:script*/", "\"probelake:data\""]
        {
            assert_eq!(TEMPLATE.matches(mark).count(), 1, "{mark}");
        }
        let filled = fill("a X b Y c", &[("X", "Y".into()), ("Y", "<y>".into())]);
        assert_eq!(filled, "a Y b <y> c");
        assert_eq!(escape_html("</title><script>"), "&lt;/title&gt;&lt;script&gt;");
    }

    #[test]
    fn the_assets_cannot_end_their_elements_early() {
        for part in STYLE.iter().chain(&SCRIPT) {
            assert!(!part.contains("</script") && !part.contains("</style") && !part.contains("<!--"));
        }
    }
}
