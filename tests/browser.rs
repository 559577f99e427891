//! The timeline page in a real browser: `run --timeline` on the quickstart, then headless
//! Chromium, driven by `tests/browser/timeline.mjs` over the DevTools protocol, fails on
//! any console error and checks that the lanes, markers and tooltips are there and that
//! zoom and pan work; it leaves a screenshot in the target directory to look at.
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let page = out.join("quickstart-seed-1.html");
    let run = Command::new(env!("CARGO_BIN_EXE_hightide"))
        .current_dir(root)
        .args([
            "run",
            "scenarios/quickstart.toml",
            "--seed",
            "1",
            "--timeline",
        ])
        .arg(&page)
        .output()
        .map_err(|e| format!("running hightide: {e}"))?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("hightide run failed ({}):\n{stderr}", run.status).into());
    }
    let wrote = format!("wrote {} (2 variants, one panel each)", page.display());
    if !stderr.contains(&wrote) {
        return Err(format!("hightide did not say {wrote:?}:\n{stderr}").into());
    }
    let screenshot = out.join("timeline.png");
    let check = Command::new(node)
        .arg(root.join("tests/browser/timeline.mjs"))
        .arg(browser)
        .arg(&page)
        .arg(&screenshot)
        .arg("2")
        .output()
        .map_err(|e| format!("running node: {e}"))?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    if check.status.success() {
        Ok(())
    } else {
        Err(report.into())
    }
}

fn main() {
    let args = Arguments::from_args();
    let required = std::env::var("HIGHTIDE_BROWSER_TEST").as_deref() == Ok("required");
    let tools = (browser(), on_path(&["node", "nodejs"]));
    let trial = match tools {
        (Some(browser), Some(node)) => Trial::test("timeline_page_in_a_browser", move || {
            timeline_page(&browser, &node)
        }),
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
            if required {
                Trial::test("timeline_page_in_a_browser", move || {
                    Err(format!("HIGHTIDE_BROWSER_TEST=required, but there is no {missing}").into())
                })
            } else {
                eprintln!(
                    "skipping the timeline browser test: no {missing} found \
                     (apt-get install chromium-headless-shell nodejs)"
                );
                Trial::test("timeline_page_in_a_browser", || Ok(())).with_ignored_flag(true)
            }
        }
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}
