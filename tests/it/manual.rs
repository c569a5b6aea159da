//! `fabricbench completions SHELL` and `fabricbench man`: what the .deb and
//! .rpm install (scripts/dist), generated from the clap definitions.

use crate::common::{text, Bench};

#[test]
fn completions_for_bash_zsh_and_fish_know_the_subcommands_and_flags() {
    let bench = Bench::new();
    for (shell, header) in
        [("bash", "complete -F _fabricbench"), ("zsh", "#compdef fabricbench"), ("fish", "complete -c fabricbench")]
    {
        let out = bench.run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(header), "{shell}: no `{header}` in {script}");
        for word in ["hosts", "compare", "stage", "dist", "export-json"] {
            assert!(script.contains(word), "{shell}: the completion has no {word}");
        }
    }
}

#[test]
fn an_unknown_shell_is_bad_input_naming_the_valid_ones() {
    let out = Bench::new().run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("tcsh") && err.contains("bash") && err.contains("zsh") && err.contains("fish"), "{err}");
}

#[test]
fn the_man_page_is_roff_with_every_subcommand() {
    let out = Bench::new().run(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.contains(".TH fabricbench 1"), "{page}");
    assert!(page.contains("fabricbench \\- Benchmark RDMA and TCP fabrics"), "{page}");
    for sub in ["run", "plan", "hosts", "pair", "completions"] {
        assert!(page.contains(&format!("fabricbench\\-{sub}(1)")), "no {sub} in {page}");
    }
}
