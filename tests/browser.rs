//! What users open, in a real browser. The timeline page: `run --timeline` on the
//! quickstart, then headless Chromium, driven by `tests/browser/timeline.mjs` over the
//! DevTools protocol, fails on any console error and checks that the lanes, markers and
//! tooltips are there and that zoom and pan work; it leaves a screenshot in the target
//! directory to look at. The sweep charts: a small sweep's SVGs, where every text must lie
//! inside the canvas (`tests/browser/charts.mjs`).
//!
//! It needs Node.js and Chromium (Debian: `apt-get install chromium-headless-shell
//! nodejs`; `HIGHTIDE_BROWSER=/path/to/chrome` picks another). Without them the test is
//! skipped and says why, unless `HIGHTIDE_BROWSER_TEST=required` (as in CI) makes that
//! a failure.

use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

const BROWSERS: &[&str] = &["chromium-headless-shell", "chromium", "google-chrome"];

/// The first of `names` on the PATH.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

fn browser() -> Option<PathBuf> {
    match std::env::var_os("HIGHTIDE_BROWSER") {
        Some(path) => Some(PathBuf::from(path)),
        None => on_path(BROWSERS),
    }
}

fn timeline_page(browser: &Path, node: &Path) -> Result<(), Failed> {
    let args = ["scenarios/quickstart.toml", "--seed", "1"];
    timeline_of(
        browser,
        node,
        &args,
        "quickstart-seed-1",
        ("2 variants, one panel each", "2", "kafka"),
    )
}

/// A RocketMQ run's page: a master's CommitLog lane, each queue held by its master (down
/// while the master has no power), no ISR.
fn rocketmq_timeline_page(browser: &Path, node: &Path) -> Result<(), Failed> {
    let args = [
        "scenarios/rocketmq-torn-tail.toml",
        "--seed",
        "2",
        "--variant",
        "async-flush",
    ];
    timeline_of(
        browser,
        node,
        &args,
        "rocketmq-torn-tail-seed-2",
        ("1 variant", "1", "rocketmq"),
    )
}

/// `hightide run ARGS --timeline NAME.html`, then the page in the browser.
fn timeline_of(
    browser: &Path,
    node: &Path,
    args: &[&str],
    name: &str,
    (variants, panels, system): (&str, &str, &str),
) -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let page = out.join(format!("{name}.html"));
    let run = Command::new(env!("CARGO_BIN_EXE_hightide"))
        .current_dir(root)
        .arg("run")
        .args(args)
        .arg("--timeline")
        .arg(&page)
        .output()
        .map_err(|e| format!("running hightide: {e}"))?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("hightide run failed ({}):\n{stderr}", run.status).into());
    }
    let wrote = format!("wrote {} ({variants})", page.display());
    if !stderr.contains(&wrote) {
        return Err(format!("hightide did not say {wrote:?}:\n{stderr}").into());
    }
    let screenshot = out.join(format!("{name}.png"));
    node_script(
        node,
        &[
            root.join("tests/browser/timeline.mjs").as_os_str(),
            browser.as_os_str(),
            page.as_os_str(),
            screenshot.as_os_str(),
            panels.as_ref(),
            system.as_ref(),
        ],
    )
}

/// A four-configuration sweep of the quickstart, one seed: both charts, with a column per
/// release, cells with a loss and cells without.
fn sweep_charts(browser: &Path, node: &Path) -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-sweep");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let file = out.join("charts.toml");
    let sweep = format!(
        "name = \"charts\"\nbase = {:?}\nseeds = [1]\n[vary]\n\"cluster.kafka\" = [\"3.9\", \"4.1\"]\n\"producer.acks\" = [\"1\", \"all\"]\n",
        root.join("scenarios/quickstart.toml")
    );
    std::fs::write(&file, sweep).map_err(|e| format!("{}: {e}", file.display()))?;
    let run = Command::new(env!("CARGO_BIN_EXE_hightide"))
        .args(["sweep"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .map_err(|e| format!("running hightide: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "hightide sweep failed ({}):\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        )
        .into());
    }
    node_script(
        node,
        &[
            root.join("tests/browser/charts.mjs").as_os_str(),
            browser.as_os_str(),
            out.join("charts-lost.svg").as_os_str(),
            out.join("charts-latency.svg").as_os_str(),
        ],
    )
}

fn node_script(node: &Path, args: &[&std::ffi::OsStr]) -> Result<(), Failed> {
    let check = Command::new(node)
        .args(args)
        .output()
        .map_err(|e| format!("running node: {e}"))?;
    if check.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        )
        .into())
    }
}

type Check = fn(&Path, &Path) -> Result<(), Failed>;
const CHECKS: &[(&str, Check)] = &[
    ("timeline_page_in_a_browser", timeline_page),
    (
        "rocketmq_timeline_page_in_a_browser",
        rocketmq_timeline_page,
    ),
    ("sweep_charts_in_a_browser", sweep_charts),
];

fn main() {
    let args = Arguments::from_args();
    let required = std::env::var("HIGHTIDE_BROWSER_TEST").as_deref() == Ok("required");
    let tools = (browser(), on_path(&["node", "nodejs"]));
    let trials = match tools {
        (Some(browser), Some(node)) => CHECKS
            .iter()
            .map(|&(name, check)| {
                let (browser, node) = (browser.clone(), node.clone());
                Trial::test(name, move || check(&browser, &node))
            })
            .collect(),
        (browser, node) => {
            let missing = [
                browser
                    .is_none()
                    .then_some("a Chromium (chromium-headless-shell)"),
                node.is_none().then_some("Node.js"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ");
            if !required {
                eprintln!(
                    "skipping the browser tests: no {missing} found \
                     (apt-get install chromium-headless-shell nodejs)"
                );
            }
            CHECKS
                .iter()
                .map(|&(name, _)| {
                    let missing = missing.clone();
                    let trial = Trial::test(name, move || {
                        Err(
                            format!("no {missing}: apt-get install chromium-headless-shell nodejs")
                                .into(),
                        )
                    });
                    trial.with_ignored_flag(!required)
                })
                .collect()
        }
    };
    libtest_mimic::run(&args, trials).exit();
}
