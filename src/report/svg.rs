//! Hand-written SVG charts for sweep reports: a grid with a cell per configuration, one
//! column per Kafka release (or fault set) and one row per combination of the other
//! settings, so a row compares configurations equal in everything but its columns and the
//! whole matrix fits on a screen. Each cell holds its numbers and a shade: darker is more
//! lost (or a longer wait), on a logarithmic scale when the values span two decades or
//! more (acks=1's tens of lost messages beside cluster power loss's thousands). The
//! canvas is as wide as its longest text, so nothing is clipped. No dependencies,
//! deterministic output.

use super::sweep::{chart_file_names, common_settings, short_settings, SweepRow};
use std::fmt::Write;

const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
const MONO: &str = "DejaVu Sans Mono, Menlo, Consolas, monospace";
/// Advance of one monospace character at 12px (0.6 em), to size the label column.
const MONO_CHAR_PX: f64 = 7.3;
const MARGIN_PX: f64 = 16.0;
/// Positive values spanning this ratio or more are shaded on a log scale.
const LOG_SCALE_RATIO: f64 = 100.0;
const ROW_PX: f64 = 24.0;
const CELL_MIN_PX: f64 = 92.0;
/// The palest shade of a cell with a value, so that it still reads as coloured.
const LIGHTEST: f64 = 0.15;

const INK: &str = "#222222";
const MUTED: &str = "#6b6b6b";
const LOSS: &str = "#d1495b";
const SAFE: &str = "#2e8b57";
const SAFE_FILL: &str = "#e3f1e8";
const WAIT: &str = "#2f6fa8";

/// The sweep keys a chart may spread across its columns, in order of preference.
const COLUMN_KEYS: [&str; 2] = ["cluster.kafka", "faults"];

/// One cell: its text, and its shade (`None` for "nothing to shade": none lost).
struct Cell {
    text: String,
    value: Option<f64>,
}

struct Chart<'a> {
    title: String,
    /// What a cell says and how it is shaded.
    legend: String,
    color: &'static str,
    /// A note on configurations the chart leaves out.
    left_out: Option<String>,
    rows: Vec<&'a SweepRow>,
}

/// The charts to write beside the report: (file name, SVG).
pub fn sweep_charts(name: &str, rows: &[SweepRow]) -> Vec<(String, String)> {
    let [lost, latency] = chart_file_names(name);
    vec![
        (lost, sweep_svg_lost(name, rows)),
        (latency, sweep_svg_latency(name, rows)),
    ]
}

/// The configurations that acknowledged something, and a note on those left out.
fn acknowledging(rows: &[SweepRow]) -> (Vec<&SweepRow>, Option<String>) {
    let kept: Vec<&SweepRow> = rows.iter().filter(|r| r.acknowledges()).collect();
    let left = rows.len() - kept.len();
    let note = (left > 0).then(|| {
        format!(
            "left out: {left} configuration{} that acknowledged nothing (acks=0)",
            if left == 1 { "" } else { "s" }
        )
    });
    (kept, note)
}

/// Acknowledged messages lost per run: the average and the worst run.
pub fn sweep_svg_lost(name: &str, rows: &[SweepRow]) -> String {
    let (rows, left_out) = acknowledging(rows);
    grid(
        &Chart {
            title: format!("{name}: acknowledged messages lost per run"),
            legend: "cell: average over runs · the worst run; darker: more lost".to_string(),
            color: LOSS,
            left_out,
            rows,
        },
        |row| {
            if row.lost_max == 0 {
                Cell {
                    text: "none".to_string(),
                    value: None,
                }
            } else {
                Cell {
                    text: format!(
                        "{} · {}",
                        number((row.lost_avg() * 10.0).round() / 10.0),
                        row.lost_max
                    ),
                    value: Some(row.lost_avg()),
                }
            }
        },
    )
}

/// Ack latency: p50 and p99, in simulated ms.
pub fn sweep_svg_latency(name: &str, rows: &[SweepRow]) -> String {
    let (rows, left_out) = acknowledging(rows);
    grid(
        &Chart {
            title: format!("{name}: ack latency, ms"),
            legend: "cell: p50 · p99, send to acknowledgement in simulated time, all runs pooled; darker: longer p99"
                .to_string(),
            color: WAIT,
            left_out,
            rows,
        },
        |row| Cell {
            text: format!("{:.0} · {:.0}", row.p50_ms(), row.p99_ms()),
            value: Some(row.p99_ms()),
        },
    )
}

/// The key spread across the columns: the first of [`COLUMN_KEYS`] with two values or
/// more, if any; and its values in the rows' order.
fn columns<'a>(rows: &[&'a SweepRow]) -> Option<(&'static str, Vec<&'a str>)> {
    COLUMN_KEYS.into_iter().find_map(|key| {
        let mut values: Vec<&str> = Vec::new();
        for value in rows.iter().filter_map(|r| value_of(r, key)) {
            if !values.contains(&value) {
                values.push(value);
            }
        }
        (values.len() > 1).then_some((key, values))
    })
}

fn value_of<'a>(row: &'a SweepRow, key: &str) -> Option<&'a str> {
    row.settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn grid(chart: &Chart, cell: impl Fn(&SweepRow) -> Cell) -> String {
    let common = common_settings(&chart.rows);
    let column = columns(&chart.rows);
    let column_key = column.as_ref().map(|(key, _)| *key);
    let column_values: Vec<&str> = column.as_ref().map_or(vec![""], |(_, v)| v.clone());
    // A grid row per combination of the settings outside the column and the common ones.
    let line_of = |row: &SweepRow| -> Vec<(String, String)> {
        row.settings
            .iter()
            .filter(|s| Some(s.0.as_str()) != column_key && !common.contains(s))
            .cloned()
            .collect()
    };
    let mut lines: Vec<Vec<(String, String)>> = Vec::new();
    for row in &chart.rows {
        let line = line_of(row);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    let find = |line: &Vec<(String, String)>, value: &str| {
        chart.rows.iter().find(|r| {
            &line_of(r) == line && column_key.is_none_or(|key| value_of(r, key) == Some(value))
        })
    };
    let cells: Vec<Vec<Option<Cell>>> = lines
        .iter()
        .map(|line| {
            column_values
                .iter()
                .map(|value| find(line, value).map(|r| cell(r)))
                .collect()
        })
        .collect();
    let scale = Scale::fit(cells.iter().flatten().flatten().filter_map(|c| c.value));
    let labels: Vec<String> = lines
        .iter()
        .map(|line| match short_settings(line.iter()) {
            label if label.is_empty() => "every configuration".to_string(),
            label => label,
        })
        .collect();
    let heading = |value: &str| match column_key {
        Some("cluster.kafka") => format!("Kafka {value}"),
        _ => value.to_string(),
    };
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let grid_x = MARGIN_PX + longest as f64 * MONO_CHAR_PX + 12.0;
    let cell_w = cells
        .iter()
        .flatten()
        .flatten()
        .map(|c| text_px(&c.text, 12.0) + 16.0)
        .chain(
            column_values
                .iter()
                .map(|v| text_px(&heading(v), 12.0) * 1.1 + 16.0),
        )
        .fold(CELL_MIN_PX, f64::max);
    let mut subtitle = chart.legend.clone();
    if !common.is_empty() && chart.rows.len() > 1 {
        let _ = write!(
            subtitle,
            " · every cell: {}",
            short_settings(common.into_iter())
        );
    }
    let footnote = chart.left_out.clone().unwrap_or_default();
    let grid_y = 92.0;
    let height =
        grid_y + lines.len() as f64 * ROW_PX + if footnote.is_empty() { 12.0 } else { 32.0 };
    let width = [
        grid_x + column_values.len() as f64 * cell_w,
        MARGIN_PX + text_px(&chart.title, 16.0) * 1.05,
        MARGIN_PX + text_px(&subtitle, 12.0),
        MARGIN_PX + text_px(&footnote, 12.0),
        MARGIN_PX + text_px(&scale_text(scale), 12.0) + 200.0,
    ]
    .into_iter()
    .fold(0.0, f64::max)
        + MARGIN_PX;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="{FONT}" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_PX}" y="26" font-size="16" font-weight="bold" fill="{INK}">{}</text>"#,
        escape(&chart.title)
    );
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_PX}" y="46" fill="{MUTED}">{}</text>"#,
        escape(&subtitle)
    );
    // The shade scale: "none" where a cell can say so, then palest to darkest, with the
    // values at its ends.
    let has_none = cells.iter().flatten().flatten().any(|c| c.value.is_none());
    if has_none {
        let _ = writeln!(
            svg,
            r#"<rect x="{MARGIN_PX}" y="55" width="14" height="12" fill="{SAFE_FILL}" stroke="{SAFE}" stroke-width="0.5"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="65" fill="{INK}">none</text>"#,
            MARGIN_PX + 18.0
        );
    }
    let ramp_x = MARGIN_PX + if has_none { 64.0 } else { 0.0 };
    for (i, shade) in [0.0, 0.25, 0.5, 0.75, 1.0].iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="55" width="14" height="12" fill="{}" fill-opacity="{:.2}"/>"#,
            ramp_x + i as f64 * 14.0,
            chart.color,
            LIGHTEST + (1.0 - LIGHTEST) * shade
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="65" fill="{INK}">{}</text>"#,
        ramp_x + 5.0 * 14.0 + 6.0,
        escape(&scale_text(scale))
    );
    if column_key.is_some() {
        for (c, value) in column_values.iter().enumerate() {
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold" fill="{INK}">{}</text>"#,
                grid_x + c as f64 * cell_w + cell_w / 2.0,
                grid_y - 8.0,
                escape(&heading(value))
            );
        }
    }
    for (r, (label, line)) in labels.iter().zip(&cells).enumerate() {
        let y = grid_y + r as f64 * ROW_PX;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-family="{MONO}" fill="{INK}">{}</text>"#,
            grid_x - 8.0,
            y + ROW_PX / 2.0 + 4.0,
            escape(label)
        );
        for (c, cell) in line.iter().enumerate() {
            let Some(cell) = cell else { continue };
            let x = grid_x + c as f64 * cell_w;
            let (fill, opacity, ink) = match cell.value {
                None => (SAFE_FILL, 1.0, SAFE),
                Some(value) => {
                    let shade = LIGHTEST + (1.0 - LIGHTEST) * scale.fraction(value);
                    (chart.color, shade, if shade > 0.6 { "white" } else { INK })
                }
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" fill-opacity="{opacity:.2}" rx="3"/>"#,
                x + 2.0,
                y + 2.0,
                cell_w - 4.0,
                ROW_PX - 4.0
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{ink}">{}</text>"#,
                x + cell_w / 2.0,
                y + ROW_PX / 2.0 + 4.0,
                escape(&cell.text)
            );
        }
    }
    if !footnote.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{MARGIN_PX}" y="{:.1}" fill="{MUTED}">{}</text>"#,
            height - 12.0,
            escape(&footnote)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The shade scale's range, in words: `0 to 50` or `1 to 10000, log scale`.
fn scale_text(scale: Scale) -> String {
    match scale {
        Scale::Linear { max, .. } => format!("0 to {}", number(max)),
        Scale::Log { low, high } => format!(
            "{} to {} (log scale)",
            number(10f64.powi(low)),
            number(10f64.powi(high))
        ),
    }
}

/// How values map onto a cell's shade, from 0 (palest) to 1 (darkest).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    /// From 0 to `max` (a round number at or above the largest value; `step` is its unit).
    Linear { max: f64, step: f64 },
    /// From 10^`low` to 10^`high`.
    Log { low: i32, high: i32 },
}

impl Scale {
    fn fit(values: impl Iterator<Item = f64>) -> Scale {
        let (mut smallest, mut largest) = (f64::INFINITY, 0.0f64);
        for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
            smallest = smallest.min(v);
            largest = largest.max(v);
        }
        if largest > 0.0 && largest / smallest >= LOG_SCALE_RATIO {
            Scale::Log {
                low: smallest.log10().floor() as i32,
                high: largest.log10().ceil() as i32,
            }
        } else {
            let (max, step) = nice_scale(largest);
            Scale::Linear { max, step }
        }
    }

    /// Where `value` lies, from 0 to 1.
    fn fraction(self, value: f64) -> f64 {
        match self {
            Scale::Linear { max, .. } => (value / max).clamp(0.0, 1.0),
            Scale::Log { .. } if value <= 0.0 => 0.0,
            Scale::Log { low, high } => {
                ((value.log10() - f64::from(low)) / f64::from(high - low)).clamp(0.0, 1.0)
            }
        }
    }
}

/// A generous width of `text` at `size` px in the chart's sans font (DejaVu Sans, the
/// widest of the fallbacks): digits and most letters are 0.63 em, spaces and dots less,
/// capitals and `m`/`w` more, so no renderer's text runs past the canvas.
fn text_px(text: &str, size: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            ' ' | '.' | ',' | '·' | ':' | 'i' | 'l' | 'j' | '|' | '\'' | '(' | ')' => 0.36,
            'm' | 'w' | 'M' | 'W' => 0.98,
            c if c.is_ascii_uppercase() => 0.75,
            _ => 0.64,
        })
        .sum();
    em * size
}

/// An axis maximum at or above `largest` and a round step (1, 2 or 5 times a power of ten)
/// giving at most about five intervals.
fn nice_scale(largest: f64) -> (f64, f64) {
    if largest <= 0.0 || !largest.is_finite() {
        return (1.0, 0.25);
    }
    let raw = largest / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    ((largest / step).ceil() * step, step)
}

/// `12`, `12.3`, `0.25`: as few decimals as the value needs, at most two.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_round_and_cover_the_largest_value() {
        assert_eq!(nice_scale(41.0), (50.0, 10.0));
        assert_eq!(nice_scale(7.0), (8.0, 2.0));
        assert_eq!(nice_scale(1000.0), (1000.0, 200.0));
        assert_eq!(nice_scale(0.0), (1.0, 0.25));
    }

    #[test]
    fn values_spanning_two_decades_get_a_log_scale() {
        let scale = Scale::fit([0.0, 14.0, 57.0, 8000.0].into_iter());
        assert_eq!(scale, Scale::Log { low: 1, high: 4 });
        assert_eq!(scale.fraction(0.0), 0.0);
        assert!((scale.fraction(100.0) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(scale.fraction(10_000.0), 1.0);
        assert_eq!(
            Scale::fit([3.0, 41.0].into_iter()),
            Scale::Linear {
                max: 50.0,
                step: 10.0
            }
        );
    }

    #[test]
    fn numbers_drop_needless_decimals() {
        assert_eq!(number(12.0), "12");
        assert_eq!(number(12.345), "12.35");
        assert_eq!(number(0.5), "0.5");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
