//! The `tokensieve` binary end to end (issue 23, item 13) on the embedded o200k_base
//! vocabulary: `compile` prints only the rules its root reaches; `check` and `masks` take
//! `--regex`, `--structural-tag`, `--lenient` and `--format json`; `bench` writes its
//! figures with `--report` (`--json` is a deprecated alias). Exit codes: 0 accepted, 1
//! rejected, 2 bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tokensieve(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tokensieve"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to a fresh file under the target's temporary folder.
fn file(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_commands");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn compile_prints_only_rules_the_root_reaches() {
    // Nested objects and a shared definition: the front end builds helper rules that the
    // compiled grammar may no longer use.
    let schema = file(
        "nested.json",
        r##"{"type":"object","properties":{
              "a":{"type":"object","properties":{"x":{"type":"integer"},"y":{"$ref":"#/$defs/s"}},"required":["x"]},
              "b":{"type":"array","items":{"$ref":"#/$defs/s"}},
              "c":{"anyOf":[{"type":"null"},{"type":"object","properties":{"z":{"type":"boolean"}}}]}},
            "required":["a"],"$defs":{"s":{"type":"string","maxLength":5}}}"##,
    );
    let out = tokensieve(&["compile", "--schema", schema.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let grammar: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let parsed = tokensieve::grammar::parse_ebnf(&grammar, "root").expect("prints EBNF");
    let reachable = parsed.reachable_only();
    assert_eq!(
        parsed.rules.len(),
        reachable.rules.len(),
        "rules the root does not reach were printed:\n{text}"
    );
    assert!(text.contains("# nodes: "), "{text}");
}

#[test]
fn check_takes_a_regex_file() {
    let regex = file("date.regex", "[0-9]{4}-[0-9]{2}-[0-9]{2}\n");
    let r = regex.to_str().unwrap();
    let ok = tokensieve(&["check", "--regex", r, "--string", "2026-12-02"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).starts_with("accepted: "), "{}", stdout(&ok));
    let bad = tokensieve(&["check", "--regex", r, "--string", "2026-1x-02"]);
    assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
    assert!(
        stderr(&bad).contains("rejected at token"),
        "{}",
        stderr(&bad)
    );
    let broken = file("broken.regex", "[0-9");
    let err = tokensieve(&[
        "check",
        "--regex",
        broken.to_str().unwrap(),
        "--string",
        "1",
    ]);
    assert_eq!(err.status.code(), Some(2));
    assert!(stderr(&err).contains("broken.regex"), "{}", stderr(&err));
}

#[test]
fn check_takes_a_structural_tag_file() {
    let tag = file(
        "tag.json",
        r#"{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<tool_call>"],
            "tags":[{"begin":"<tool_call>","content":{"type":"json_schema","json_schema":
              {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},"end":"</tool_call>"}]}}"#,
    );
    let t = tag.to_str().unwrap();
    let ok = tokensieve(&[
        "check",
        "--structural-tag",
        t,
        "--string",
        "Sure. <tool_call>{\"n\": 3}</tool_call>",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let bad = tokensieve(&[
        "check",
        "--structural-tag",
        t,
        "--string",
        "Sure. <tool_call>{\"n\": \"3\"}</tool_call>",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
}

#[test]
fn lenient_is_reachable_from_the_command_line() {
    let schema = file(
        "vendor.json",
        r#"{"type":"object","properties":{"a":{"type":"string","x-vendor":1}},"required":["a"]}"#,
    );
    let s = schema.to_str().unwrap();
    let strict = tokensieve(&["check", "--schema", s, "--string", r#"{"a": "b"}"#]);
    assert_eq!(strict.status.code(), Some(2));
    assert!(stderr(&strict).contains("lenient"), "{}", stderr(&strict));
    let lenient = tokensieve(&[
        "check",
        "--schema",
        s,
        "--lenient",
        "--string",
        r#"{"a": "b"}"#,
    ]);
    assert_eq!(lenient.status.code(), Some(0), "{}", stderr(&lenient));
    let err = stderr(&lenient);
    assert!(
        err.contains("--lenient ignored `x-vendor`") && err.contains("/properties/a/x-vendor"),
        "{err}"
    );
}

#[test]
fn masks_and_check_print_json() {
    let out = tokensieve(&[
        "masks",
        "--json",
        "--format",
        "json",
        "--string",
        r#"{"k": [1, true]}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(v["accepted"], true);
    assert_eq!(v["complete"], true);
    let tokens = v["tokens"].as_u64().unwrap() as usize;
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), tokens + 1);
    assert!(steps[..tokens].iter().all(|s| s["token_allowed"] == true));
    assert!(steps.iter().all(|s| s["allowed"].as_u64().unwrap() > 0));
    // The last step: after every token, a stop token is allowed.
    assert!(steps[tokens]["id"].is_null());
    assert_eq!(steps[tokens]["token_allowed"], true);

    let rejected = tokensieve(&[
        "check",
        "--json",
        "--format",
        "json",
        "--string",
        "{\"k\" 1}",
    ]);
    assert_eq!(rejected.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&rejected)).expect("JSON");
    assert_eq!(v["accepted"], false);
    let r = &v["rejected"];
    assert!(r["step"].as_u64().unwrap() >= 1, "{v}");
    assert!(!r["reason"].as_str().unwrap().is_empty());
    assert!(v.get("steps").is_none(), "check has no steps: {v}");

    let short = tokensieve(&["check", "--json", "--format", "json", "--string", "[1, 2"]);
    assert_eq!(short.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&short)).expect("JSON");
    assert!(v["rejected"].is_null());
    assert!(v["expects"].is_string(), "{v}");
}

#[test]
fn bench_writes_its_figures_with_report() {
    let help = tokensieve(&["bench", "--help"]);
    let text = stdout(&help);
    assert!(text.contains("--report <OUT>"), "{text}");
    assert!(
        !text.contains("--json"),
        "the deprecated alias is hidden: {text}"
    );
    // The old name still parses, and conflicts with the new one.
    let both = tokensieve(&[
        "bench",
        "--tokenizer",
        "t.json",
        "--schemas",
        "s",
        "--json",
        "a",
        "--report",
        "b",
    ]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
}
