//! `run --timeline OUT.html`: the runs of one seed as one self-contained page, a panel per
//! variant on a shared time axis that zooms and pans. Lanes show each host (up, killed,
//! without power, exited), each partition (its leader as the controller saw it, the ISR
//! against `min.insync.replicas`, the leader's LEO and the HW), every fault and what the
//! cluster did in reply, and acknowledged, failed and lost sends over time. Hovering any
//! event says what happened and why; the checkers' stories follow each panel.
//!
//! The data is computed here (`data`) and embedded as JSON; the page's script only scales
//! and paints it, so the page needs nothing but a browser.

mod data;

pub use data::{panel, Panel, PanelInput, BUCKET_MS};

const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// The whole page for `panels`, each one run of the same seed.
pub fn html(title: &str, panels: &[Panel]) -> String {
    let json = serde_json::to_string(panels).expect("timeline data serializes");
    // Inside <script>, only `</` could end the element early; JSON allows `<\/`.
    let json = json.replace("</", "<\\/");
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head>
<body>
<header><h1>{title}</h1>
<div class="controls"><button id="zoom-in" title="zoom in">+</button><button id="zoom-out" title="zoom out">&minus;</button><button id="zoom-reset">whole run</button>
<span id="range"></span><span class="hint">wheel to zoom, drag to pan, double-click for the whole run, hover for details</span></div>
<div id="legend" class="legend"></div></header>
<main id="panels"></main>
<div id="tip" role="tooltip"></div>
<script id="timeline-data" type="application/json">{json}</script>
<script>{SCRIPT}</script>
</body></html>
"#,
        title = escape(title),
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests;
