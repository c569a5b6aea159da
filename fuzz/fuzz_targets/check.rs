//! `--check` expressions (`scenario::Rule::parse`, `SUBJECT >= THRESHOLD`).
//! An accepted rule is finite and positive (a loss share may be 0), and
//! prints (as run.json and the summary do) as text that parses back to the
//! same rule.
#![no_main]

use fabricbench::scenario::{Rule, Threshold};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(rule) = Rule::parse(text) else { return };
    match rule.threshold {
        Threshold::Share(n) => assert!((0.0..100.0).contains(&n), "`{text}` gives {n}%"),
        Threshold::Gbps(n)
        | Threshold::OfBest(n)
        | Threshold::OfLineRate(n)
        | Threshold::TimesMin(n)
        | Threshold::Micros(n) => assert!(n.is_finite() && n > 0.0, "`{text}` gives {n}"),
    }
    let shown = rule.to_string();
    assert_eq!(Rule::parse(&shown), Ok(rule), "`{text}` shows as `{shown}`");
});
