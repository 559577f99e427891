//! `run --timeline OUT.html`: one run as a picture. Lanes show when each host was up,
//! killed, without power or exited; who led each partition (and the ISR) as the controller
//! saw it; every fault as it fired; acknowledged, failed and indeterminate sends over time;
//! and where the messages that were later lost had been acknowledged.

use crate::history::{Event, Op};
use crate::os::clock::SimTime;
use crate::sim::runner::Timeline;
use crate::sim::world::Stopped;
use crate::types::{BrokerId, HostName};
use std::fmt::Write;
use std::time::Duration;

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 130.0;
const LANE: f64 = 22.0;
const CHART: f64 = 120.0;
const BROKER_COLORS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2",
];

/// What the picture needs besides the timeline.
pub struct TimelineInput<'a> {
    pub title: &'a str,
    pub timeline: &'a Timeline,
    pub history: &'a [Event],
    /// When each acknowledged-then-lost message had been acknowledged.
    pub lost_acked_at: &'a [SimTime],
    pub summary: &'a str,
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn broker_color(broker: BrokerId) -> &'static str {
    BROKER_COLORS[(broker.0 as usize).saturating_sub(1) % BROKER_COLORS.len()]
}

struct Scale {
    end: f64,
}

impl Scale {
    fn x(&self, t: SimTime) -> f64 {
        LEFT + (t.since_start().as_secs_f64() / self.end).min(1.0) * (WIDTH - LEFT - 10.0)
    }
}

/// The whole HTML page.
pub fn html(input: &TimelineInput<'_>) -> String {
    let t = input.timeline;
    let scale = Scale {
        end: (t.duration + t.heal).as_secs_f64().max(0.001),
    };
    // The reader exists only for the final read after the heal phase.
    let hosts: Vec<HostName> = t
        .hosts
        .iter()
        .copied()
        .filter(|h| *h != HostName::Reader)
        .collect();
    let lanes = hosts.len() + partitions(t).len();
    let lanes_height = 30.0 + lanes as f64 * LANE;
    let height = lanes_height + CHART + 90.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    // The heal phase.
    let heal_x = scale.x(SimTime::after_start(t.duration));
    let _ = write!(
        svg,
        r##"<rect x="{heal_x:.1}" y="10" width="{:.1}" height="{:.1}" fill="#f3f3f3"/><text x="{:.1}" y="22" fill="#888">heal phase</text>"##,
        WIDTH - 10.0 - heal_x,
        height - 20.0,
        heal_x + 4.0
    );
    let mut y = 30.0;
    for &host in &hosts {
        host_lane(&mut svg, &scale, t, host, y);
        y += LANE;
    }
    for tp in partitions(t) {
        leadership_lane(&mut svg, &scale, t, &tp, y);
        y += LANE;
    }
    for (at, what) in &t.faults {
        let x = scale.x(*at);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="26" x2="{x:.1}" y2="{:.1}" stroke="#d62728" stroke-dasharray="3,3" stroke-width="1"><title>{:.3}s {}</title></line>"##,
            lanes_height + 30.0 + CHART,
            at.since_start().as_secs_f64(),
            escape(what)
        );
    }
    send_chart(&mut svg, &scale, input, lanes_height + 30.0);
    axis(&mut svg, &scale, height - 25.0);
    svg.push_str("</svg>");

    let faults: String = t
        .faults
        .iter()
        .map(|(at, what)| {
            format!(
                "<li><b>{:.3}s</b> {}</li>",
                at.since_start().as_secs_f64(),
                escape(what)
            )
        })
        .collect();
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:24px;color:#222}} .legend span{{display:inline-block;margin-right:14px}} .sw{{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px}}</style>
</head><body><h2>{title}</h2><p>{summary}</p>
<div class="legend"><span><i class="sw" style="background:#8fd18f"></i>up</span><span><i class="sw" style="background:#e45756"></i>killed</span><span><i class="sw" style="background:#333"></i>power lost</span><span><i class="sw" style="background:#bbb"></i>exited (controlled shutdown or log dir offline)</span><span><i class="sw" style="background:#4e79a7"></i>leader lane: colour of the leading broker, red = offline</span><span><i class="sw" style="background:#d62728"></i>fault / lost ack</span></div>
{svg}<h3>Faults</h3><ul>{faults}</ul></body></html>
"#,
        title = escape(input.title),
        summary = escape(input.summary),
    )
}

fn partitions(t: &Timeline) -> Vec<crate::types::TopicPartition> {
    let mut tps: Vec<_> = t.leadership.iter().map(|c| c.tp.clone()).collect();
    tps.sort();
    tps.dedup();
    tps
}

fn label(svg: &mut String, y: f64, text: &str) {
    let _ = write!(
        svg,
        r#"<text x="8" y="{:.1}">{}</text>"#,
        y + 14.0,
        escape(text)
    );
}

fn host_lane(svg: &mut String, scale: &Scale, t: &Timeline, host: HostName, y: f64) {
    label(svg, y, &host.to_string());
    let mut state: Option<Stopped> = None;
    let mut since = SimTime::ZERO;
    let end = SimTime::after_start(t.duration + t.heal);
    let changes = t.host_changes.iter().filter(|c| c.host == host);
    let mut segments = Vec::new();
    for change in changes {
        segments.push((since, change.time, state));
        state = change.stopped;
        since = change.time;
    }
    segments.push((since, end, state));
    for (from, to, state) in segments {
        let color = match state {
            None => "#8fd18f",
            Some(Stopped::Killed) => "#e45756",
            Some(Stopped::PowerLost) => "#333",
            Some(Stopped::Exited) => "#bbb",
        };
        let (x0, x1) = (scale.x(from), scale.x(to));
        let _ = write!(
            svg,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
            y + 3.0,
            (x1 - x0).max(0.5),
            LANE - 6.0
        );
    }
}

fn leadership_lane(
    svg: &mut String,
    scale: &Scale,
    t: &Timeline,
    tp: &crate::types::TopicPartition,
    y: f64,
) {
    label(svg, y, &format!("leader {tp}"));
    let changes: Vec<_> = t.leadership.iter().filter(|c| &c.tp == tp).collect();
    let end = SimTime::after_start(t.duration + t.heal);
    for (i, change) in changes.iter().enumerate() {
        let to = changes.get(i + 1).map_or(end, |next| next.time);
        let (x0, x1) = (scale.x(change.time), scale.x(to));
        let color = change.leader.map_or("#d62728", broker_color);
        let isr: Vec<String> = change.isr.iter().map(|b| b.0.to_string()).collect();
        let leader = change
            .leader
            .map_or("offline".to_string(), |b| b.to_string());
        let _ = write!(
            svg,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.85"><title>{:.3}s {leader}, epoch {}, ISR {{{}}}</title></rect>"#,
            y + 3.0,
            (x1 - x0).max(0.5),
            LANE - 6.0,
            change.time.since_start().as_secs_f64(),
            change.leader_epoch,
            isr.join(",")
        );
        if x1 - x0 > 60.0 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" fill="white">e{} ISR {{{}}}</text>"#,
                x0 + 3.0,
                y + 15.0,
                change.leader_epoch,
                isr.join(",")
            );
        }
    }
}

/// Acknowledged, failed and indeterminate completions per bucket, and lost acks as ticks.
fn send_chart(svg: &mut String, scale: &Scale, input: &TimelineInput<'_>, top: f64) {
    let end = input.timeline.duration + input.timeline.heal;
    let buckets = 200usize;
    let width = end.as_secs_f64() / buckets as f64;
    let bucket = |t: Duration| ((t.as_secs_f64() / width) as usize).min(buckets - 1);
    let mut ok = vec![0u32; buckets];
    let mut bad = vec![0u32; buckets];
    for event in input.history {
        match event.op {
            Op::Ok { .. } => ok[bucket(event.time.since_start())] += 1,
            Op::Fail { .. } | Op::Info { .. } => bad[bucket(event.time.since_start())] += 1,
            _ => {}
        }
    }
    // Scale to the steady rate, not to the burst of retries after a failover: the 95th
    // percentile of busy buckets, with headroom; taller buckets are clipped.
    let mut busy: Vec<u32> = ok.iter().chain(&bad).copied().filter(|&n| n > 0).collect();
    busy.sort_unstable();
    let p95 = busy.get(busy.len() * 95 / 100).copied().unwrap_or(1);
    let max = (f64::from(p95) * 1.5).max(1.0);
    label(svg, top - 4.0, "sends / bucket");
    let _ = write!(
        svg,
        r##"<text x="8" y="{:.1}" fill="#888">top = {} / {:.0} ms</text>"##,
        top + 28.0,
        max as u32,
        width * 1000.0
    );
    let polyline = |counts: &[u32], color: &str| {
        let points: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let x = scale.x(SimTime::after_start(Duration::from_secs_f64(
                    (i as f64 + 0.5) * width,
                )));
                let y = top + CHART - (n as f64 / max).min(1.0) * CHART;
                format!("{x:.1},{y:.1}")
            })
            .collect();
        format!(
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
            points.join(" ")
        )
    };
    svg.push_str(&polyline(&ok, "#2ca02c"));
    svg.push_str(&polyline(&bad, "#ff7f0e"));
    for &at in input.lost_acked_at {
        let x = scale.x(at);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#d62728" stroke-width="1"/>"##,
            top + CHART - 12.0,
            top + CHART
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" fill="#2ca02c">acknowledged</text><text x="{:.1}" y="{:.1}" fill="#ff7f0e">failed or indeterminate</text><text x="{:.1}" y="{:.1}" fill="#d62728">| acked, later lost</text>"##,
        LEFT,
        top - 4.0,
        LEFT + 100.0,
        top - 4.0,
        LEFT + 260.0,
        top - 4.0
    );
}

fn axis(svg: &mut String, scale: &Scale, y: f64) {
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#444"/>"##,
        WIDTH - 10.0
    );
    let step = if scale.end > 60.0 {
        10.0
    } else if scale.end > 20.0 {
        5.0
    } else {
        1.0
    };
    let mut s = 0.0;
    while s <= scale.end + 1e-9 {
        let x = scale.x(SimTime::after_start(Duration::from_secs_f64(s)));
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{s}s</text>"##,
            y + 4.0,
            y + 16.0
        );
        s += step;
    }
}
