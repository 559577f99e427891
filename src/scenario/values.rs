//! The small value languages of scenario files: durations, seed sets and comparisons.

use crate::check::{comparison_symbol, Comparison};
use std::time::Duration;

/// The most seeds one set may name: enough for any sweep, small enough to never exhaust
/// memory on a typo like `"0..99999999999"`.
pub const MAX_SEEDS: u64 = 1_000_000;

const DURATION_HELP: &str =
    "expected a whole number and a unit (ms, s, m or h), like \"250ms\", \"10s\" or \"2m\"";

/// `"250ms"`, `"10s"`, `"2m"`, `"1h"`: a whole number and a unit, nothing else.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("invalid duration `{text}`: {DURATION_HELP}")),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration `{text}`: {DURATION_HELP}"))?;
    number
        .checked_mul(millis_per_unit)
        .filter(|&ms| ms <= i64::MAX as u64)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration `{text}` is too long"))
}

/// The shortest exact spelling of a duration in the units `parse_duration` reads.
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms == 0 {
        "0s".to_owned()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1_000) {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    }
}

/// A seed set: `"20"` (seeds 1 to 20), `"3,17,42"`, or `"100..200"` (100 to 199).
pub fn parse_seeds(spec: &str) -> Result<Vec<u64>, String> {
    let spec = spec.trim();
    let help = "expected a count (\"20\": seeds 1 to 20), a list (\"3,17,42\") or a range (\"100..200\": 100 to 199)";
    if let Some((from, to)) = spec.split_once("..") {
        let from: u64 = from
            .trim()
            .parse()
            .map_err(|_| format!("invalid seeds `{spec}`: {help}"))?;
        let to: u64 = to
            .trim()
            .parse()
            .map_err(|_| format!("invalid seeds `{spec}`: {help}"))?;
        if from >= to {
            return Err(format!(
                "seed range `{spec}` is empty (it runs from {from} up to, not including, {to})"
            ));
        }
        if to - from > MAX_SEEDS {
            return Err(format!(
                "seed range `{spec}` has more than {MAX_SEEDS} seeds"
            ));
        }
        return Ok((from..to).collect());
    }
    if spec.contains(',') {
        let seeds = spec
            .split(',')
            .map(|s| s.trim().parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|_| format!("invalid seeds `{spec}`: {help}"))?;
        return check_seed_list(seeds);
    }
    let count: u64 = spec
        .parse()
        .map_err(|_| format!("invalid seeds `{spec}`: {help}"))?;
    seed_count(count)
}

/// `seeds = N`: seeds 1 to N.
pub fn seed_count(count: u64) -> Result<Vec<u64>, String> {
    if count == 0 {
        return Err("seeds must be at least 1".to_owned());
    }
    if count > MAX_SEEDS {
        return Err(format!(
            "{count} seeds is more than the limit of {MAX_SEEDS}"
        ));
    }
    Ok((1..=count).collect())
}

/// A list of seeds must be non-empty and name each seed once (a seed run twice is the
/// same run twice).
pub fn check_seed_list(seeds: Vec<u64>) -> Result<Vec<u64>, String> {
    if seeds.is_empty() {
        return Err("the seed list is empty".to_owned());
    }
    let mut sorted = seeds.clone();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(format!("seed {} is listed twice", pair[0]));
    }
    if seeds.len() as u64 > MAX_SEEDS {
        return Err(format!("more than {MAX_SEEDS} seeds"));
    }
    Ok(seeds)
}

/// `"== 0"`, `"!= 0"`, `"> 0"`, `">= 1000"`, `"< 5"`, `"<= 5"`, or a bare `"5"` (exact).
pub fn parse_comparison(text: &str) -> Result<(Comparison, u64), String> {
    let trimmed = text.trim();
    let (comparison, rest) = Comparison::ALL
        .iter()
        .find_map(|&cmp| {
            trimmed
                .strip_prefix(comparison_symbol(cmp))
                .map(|rest| (cmp, rest))
        })
        .unwrap_or((Comparison::Eq, trimmed));
    let rest = rest.trim_start();
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid expectation `{text}`: expected an integer or a comparison like \"== 0\", \"!= 0\", \"> 0\", \">= 1000\", \"< 5\" or \"<= 5\""
        ));
    }
    let value = rest
        .parse::<u64>()
        .map_err(|_| format!("number in `{text}` is too large"))?;
    Ok((comparison, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_whole_number_and_a_unit() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in [
            "10", "1.5s", "s", "", "10 s", " 10s", "-1s", "10sec", "10us", "1e3ms",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{bad}: {err}");
        }
        assert!(parse_duration("99999999999999999999h").is_err());
        assert!(parse_duration("9999999999999999h")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn durations_print_as_they_parse() {
        for text in ["250ms", "10s", "2m", "1h", "0s", "1500ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }

    #[test]
    fn seeds_count_list_and_range() {
        assert_eq!(parse_seeds("3"), Ok(vec![1, 2, 3]));
        assert_eq!(parse_seeds("3,17,42"), Ok(vec![3, 17, 42]));
        assert_eq!(parse_seeds(" 100..103 "), Ok(vec![100, 101, 102]));
        assert!(parse_seeds("7,").is_err());
        assert!(parse_seeds("0").is_err());
        assert!(parse_seeds("5..5").unwrap_err().contains("empty"));
        assert!(parse_seeds("0..99999999999")
            .unwrap_err()
            .contains("more than"));
        assert!(parse_seeds("3,3").unwrap_err().contains("twice"));
        assert!(parse_seeds("x").unwrap_err().starts_with("invalid seeds"));
        assert!(parse_seeds("").is_err());
    }

    #[test]
    fn comparisons() {
        assert_eq!(parse_comparison("== 0"), Ok((Comparison::Eq, 0)));
        assert_eq!(parse_comparison("!= 0"), Ok((Comparison::Ne, 0)));
        assert_eq!(parse_comparison("> 0"), Ok((Comparison::Gt, 0)));
        assert_eq!(parse_comparison(">=1000"), Ok((Comparison::Ge, 1000)));
        assert_eq!(parse_comparison("< 5"), Ok((Comparison::Lt, 5)));
        assert_eq!(parse_comparison("<= 5"), Ok((Comparison::Le, 5)));
        assert_eq!(parse_comparison("12"), Ok((Comparison::Eq, 12)));
        for bad in [">> 0", "> -1", "=< 5", "", ">", "about 5", "5 5"] {
            assert!(
                parse_comparison(bad)
                    .unwrap_err()
                    .starts_with("invalid expectation"),
                "{bad}"
            );
        }
    }
}
