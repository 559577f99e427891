//! Hand-written SVG bar charts for sweep reports: one horizontal bar per configuration
//! (long labels read better down the side than under tilted bars), a value on each bar,
//! a scale with gridlines. The scale is logarithmic when the values span two decades or
//! more (acks=1's tens of lost messages beside cluster power loss's thousands), and the
//! canvas is as wide as its longest text, so nothing is clipped. No dependencies,
//! deterministic output.

use super::sweep::{chart_file_names, common_settings, short_settings, SweepRow};
use std::fmt::Write;

const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
const MONO: &str = "DejaVu Sans Mono, Menlo, Consolas, monospace";
/// Advance of one monospace character at 12px (0.6 em), to size the label column.
const MONO_CHAR_PX: f64 = 7.3;
const MARGIN_PX: f64 = 16.0;
const PLOT_WIDTH_PX: f64 = 460.0;
/// Positive values spanning this ratio or more are drawn on a log scale.
const LOG_SCALE_RATIO: f64 = 100.0;
const ROW_PX: f64 = 24.0;
const BAR_PX: f64 = 14.0;

const INK: &str = "#222222";
const MUTED: &str = "#6b6b6b";
const GRID: &str = "#e3e3e3";
const STRIPE: &str = "#f7f7f7";
const LOSS: &str = "#d1495b";
const LOSS_DARK: &str = "#8c1c2c";
const SAFE: &str = "#2e8b57";
const P99: &str = "#a6c8e6";
const P50: &str = "#2f6fa8";

/// One bar: a main value, optionally an inner (darker, shorter) value and a whisker.
struct Bar {
    label: String,
    value: f64,
    inner: Option<f64>,
    whisker: Option<f64>,
    text: String,
    text_color: &'static str,
}

struct Chart<'a> {
    title: String,
    subtitle: String,
    axis_label: &'a str,
    color: &'static str,
    inner_color: &'static str,
    legend: &'a [(&'static str, &'static str)],
}

/// The charts to write beside the report: (file name, SVG).
pub fn sweep_charts(name: &str, rows: &[SweepRow]) -> Vec<(String, String)> {
    let [lost, latency] = chart_file_names(name);
    vec![
        (lost, sweep_svg_lost(name, rows)),
        (latency, sweep_svg_latency(name, rows)),
    ]
}

/// Acked messages lost per run: bar = average, whisker = worst run.
pub fn sweep_svg_lost(name: &str, rows: &[SweepRow]) -> String {
    let labels = labels(rows);
    let bars: Vec<Bar> = rows
        .iter()
        .zip(labels)
        .map(|(row, label)| {
            let (text, text_color) = if !row.acknowledges() {
                ("nothing acknowledged (acks=0)".to_string(), MUTED)
            } else if row.lost_max == 0 {
                ("none lost".to_string(), SAFE)
            } else {
                (
                    format!(
                        "avg {} · worst {} · {}/{} runs",
                        number(row.lost_avg()),
                        row.lost_max,
                        row.runs_with_loss,
                        row.runs
                    ),
                    LOSS_DARK,
                )
            };
            Bar {
                label,
                value: row.lost_avg(),
                inner: None,
                whisker: (row.lost_max > 0).then_some(row.lost_max as f64),
                text,
                text_color,
            }
        })
        .collect();
    horizontal_bars(
        &Chart {
            title: format!("{name}: acknowledged messages lost per run"),
            subtitle: subtitle("bar: average over runs; whisker: the worst run", rows),
            axis_label: "acknowledged messages lost per run",
            color: LOSS,
            inner_color: LOSS,
            legend: &[],
        },
        &bars,
    )
}

/// Ack latency: bar = p99, inner bar = p50, in simulated ms.
pub fn sweep_svg_latency(name: &str, rows: &[SweepRow]) -> String {
    let labels = labels(rows);
    let bars: Vec<Bar> = rows
        .iter()
        .zip(labels)
        .map(|(row, label)| {
            let has_acks = row.latency.count() > 0;
            Bar {
                label,
                value: row.p99_ms(),
                inner: has_acks.then(|| row.p50_ms()),
                whisker: None,
                text: if has_acks {
                    format!("p50 {:.1} · p99 {:.1} ms", row.p50_ms(), row.p99_ms())
                } else {
                    "no acknowledgements".to_string()
                },
                text_color: if has_acks { INK } else { MUTED },
            }
        })
        .collect();
    horizontal_bars(
        &Chart {
            title: format!("{name}: ack latency"),
            subtitle: subtitle(
                "send to acknowledgement, simulated time, all runs pooled",
                rows,
            ),
            axis_label: "milliseconds",
            color: P99,
            inner_color: P50,
            legend: &[(P50, "p50"), (P99, "p99")],
        },
        &bars,
    )
}

/// Bar labels: the settings that vary between rows (all of them if none varies).
fn labels(rows: &[SweepRow]) -> Vec<String> {
    let common = common_settings(rows);
    rows.iter()
        .map(|row| {
            let varying = row.settings.iter().filter(|s| !common.contains(s));
            match short_settings(varying) {
                label if label.is_empty() => row.label(),
                label => label,
            }
        })
        .collect()
}

/// The chart's note, and the settings every bar shares.
fn subtitle(note: &str, rows: &[SweepRow]) -> String {
    let common = common_settings(rows);
    if common.is_empty() || rows.len() < 2 {
        note.to_string()
    } else {
        format!("{note} · every bar: {}", short_settings(common.into_iter()))
    }
}

fn horizontal_bars(chart: &Chart, bars: &[Bar]) -> String {
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0);
    let plot_x = MARGIN_PX + longest as f64 * MONO_CHAR_PX + 14.0;
    let plot_y = 74.0;
    let plot_h = bars.len() as f64 * ROW_PX;
    let height = plot_y + plot_h + 56.0;
    let values = bars
        .iter()
        .flat_map(|b| [Some(b.value), b.inner, b.whisker])
        .flatten();
    let scale = Scale::fit(values);
    let x_of = |v: f64| plot_x + scale.fraction(v) * PLOT_WIDTH_PX;
    // Each value text starts right of its bar (or whisker); the canvas holds the longest.
    let text_x: Vec<f64> = bars
        .iter()
        .map(|b| x_of(b.value).max(b.whisker.map_or(0.0, x_of)) + 6.0)
        .collect();
    let width = bars
        .iter()
        .zip(&text_x)
        .map(|(b, x)| x + text_px(&b.text, 12.0))
        .chain([
            plot_x + PLOT_WIDTH_PX + 20.0,
            MARGIN_PX + text_px(&chart.title, 16.0) * 1.05,
            MARGIN_PX + text_px(&chart.subtitle, 12.0),
        ])
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
        escape(&chart.subtitle)
    );
    let mut legend_x = MARGIN_PX;
    for (color, name) in chart.legend {
        let _ = writeln!(
            svg,
            r#"<rect x="{legend_x}" y="56" width="12" height="10" fill="{color}"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="65" fill="{INK}">{}</text>"#,
            legend_x + 16.0,
            escape(name)
        );
        legend_x += 60.0;
    }

    for i in (1..bars.len()).step_by(2) {
        let row_y = plot_y + i as f64 * ROW_PX;
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{row_y:.1}" width="{:.1}" height="{ROW_PX}" fill="{STRIPE}"/>"#,
            MARGIN_PX / 2.0,
            width - MARGIN_PX
        );
    }
    for (tick, labelled) in scale.ticks() {
        let x = x_of(tick);
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{plot_y:.1}" x2="{x:.1}" y2="{:.1}" stroke="{GRID}"{}/>"#,
            plot_y + plot_h,
            if labelled {
                ""
            } else {
                r#" stroke-dasharray="2,3""#
            }
        );
        if labelled {
            let _ = writeln!(
                svg,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="{MUTED}">{}</text>"#,
                plot_y + plot_h + 16.0,
                number(tick)
            );
        }
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{plot_x:.1}" y1="{plot_y:.1}" x2="{plot_x:.1}" y2="{:.1}" stroke="{MUTED}"/>"#,
        plot_y + plot_h
    );
    let _ = writeln!(
        svg,
        r#"<line x1="{plot_x:.1}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{MUTED}"/>"#,
        plot_y + plot_h,
        plot_x + PLOT_WIDTH_PX
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{INK}">{}</text>"#,
        plot_x + PLOT_WIDTH_PX / 2.0,
        plot_y + plot_h + 38.0,
        escape(&match scale {
            Scale::Linear { .. } => chart.axis_label.to_owned(),
            Scale::Log { .. } => format!("{} (log scale)", chart.axis_label),
        })
    );

    for (i, bar) in bars.iter().enumerate() {
        let middle = plot_y + i as f64 * ROW_PX + ROW_PX / 2.0;
        let bar_y = middle - BAR_PX / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-family="{MONO}" fill="{INK}">{}</text>"#,
            plot_x - 8.0,
            middle + 4.0,
            escape(&bar.label)
        );
        let end = x_of(bar.value);
        if end > plot_x {
            let _ = writeln!(
                svg,
                r#"<rect x="{plot_x:.1}" y="{bar_y:.1}" width="{:.1}" height="{BAR_PX}" fill="{}" rx="2"/>"#,
                end - plot_x,
                chart.color
            );
        }
        if let Some(inner) = bar.inner.filter(|&v| x_of(v) > plot_x) {
            let _ = writeln!(
                svg,
                r#"<rect x="{plot_x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" rx="1"/>"#,
                bar_y + 3.0,
                x_of(inner) - plot_x,
                BAR_PX - 6.0,
                chart.inner_color
            );
        }
        if let Some(whisker) = bar.whisker {
            let tip = x_of(whisker);
            let _ = writeln!(
                svg,
                r#"<line x1="{end:.1}" y1="{middle:.1}" x2="{tip:.1}" y2="{middle:.1}" stroke="{LOSS_DARK}" stroke-width="1.5"/>"#
            );
            let _ = writeln!(
                svg,
                r#"<line x1="{tip:.1}" y1="{:.1}" x2="{tip:.1}" y2="{:.1}" stroke="{LOSS_DARK}" stroke-width="1.5"/>"#,
                middle - 5.0,
                middle + 5.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" fill="{}">{}</text>"#,
            text_x[i],
            middle + 4.0,
            bar.text_color,
            escape(&bar.text)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// How values map onto the plot's width.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    /// From 0 to `max`, gridlines every `step`.
    Linear { max: f64, step: f64 },
    /// From 10^`low` to 10^`high`, a gridline per decade; 0 draws no bar.
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

    /// Where `value` lies, from 0 (the axis) to 1 (the plot's right edge).
    fn fraction(self, value: f64) -> f64 {
        match self {
            Scale::Linear { max, .. } => (value / max).clamp(0.0, 1.0),
            Scale::Log { .. } if value <= 0.0 => 0.0,
            Scale::Log { low, high } => {
                ((value.log10() - f64::from(low)) / f64::from(high - low)).clamp(0.0, 1.0)
            }
        }
    }

    /// Gridline positions, and whether each is labelled: every linear step; on a log
    /// scale each power of ten, with unlabelled lines at 2× and 5× between them.
    fn ticks(self) -> Vec<(f64, bool)> {
        match self {
            Scale::Linear { max, step } => {
                let count = (max / step).round() as usize;
                (0..=count).map(|i| (i as f64 * step, true)).collect()
            }
            Scale::Log { low, high } => (low..=high)
                .flat_map(|e| {
                    let decade = 10f64.powi(e);
                    let minor = (e < high).then_some([2.0 * decade, 5.0 * decade]);
                    std::iter::once((decade, true))
                        .chain(minor.into_iter().flatten().map(|v| (v, false)))
                })
                .collect(),
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
        let labelled: Vec<f64> = scale
            .ticks()
            .into_iter()
            .filter(|t| t.1)
            .map(|t| t.0)
            .collect();
        assert_eq!(labelled, [10.0, 100.0, 1000.0, 10_000.0]);
        assert_eq!(
            Scale::fit([3.0, 41.0].into_iter()),
            Scale::Linear {
                max: 50.0,
                step: 10.0
            }
        );
    }

    #[test]
    fn the_canvas_holds_its_longest_value_text() {
        let bar = |label: &str, value: f64, text: &str| Bar {
            label: label.to_owned(),
            value,
            inner: None,
            whisker: Some(value * 2.0),
            text: text.to_owned(),
            text_color: INK,
        };
        let long = "avg 4000 · worst 8000 · 10/10 runs, and a good deal more to say";
        let svg = horizontal_bars(
            &Chart {
                title: "t".to_owned(),
                subtitle: String::new(),
                axis_label: "lost",
                color: LOSS,
                inner_color: LOSS,
                legend: &[],
            },
            &[bar("a", 4000.0, long), bar("b", 1.0, "x")],
        );
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        let text_x: f64 = svg
            .lines()
            .find(|l| l.contains(long))
            .and_then(|l| l.split("x=\"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .and_then(|x| x.parse().ok())
            .unwrap();
        assert!(text_x + text_px(long, 12.0) <= width - MARGIN_PX + 0.5);
        assert!(svg.contains("lost (log scale)"));
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
