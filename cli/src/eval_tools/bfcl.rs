//! BFCL (Berkeley Function Calling Leaderboard) questions and their possible answers, and a
//! simplified version of BFCL's AST checker that says whether a call matches one.
//!
//! Files: `<dir>/BFCL_v4_<category>.json` (JSONL: `{"id", "question": [[{role, content}]],
//! "function": [{name, description, parameters}]}`) and
//! `<dir>/possible_answer/BFCL_v4_<category>.json` (JSONL: `{"id", "ground_truth":
//! [{"<function name>": {"<param>": [<allowed values>]}}]}`).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// One question: the conversation, the offered functions (BFCL's dialect of JSON Schema) and
/// the ground truth (one entry per expected call).
pub struct Question {
    /// Such as `simple_python_0`.
    pub id: String,
    /// `(role, content)` of each message of the first turn.
    pub messages: Vec<(String, String)>,
    /// The `function` list, as in the file.
    pub functions: Vec<Value>,
    /// `ground_truth`: `[{name: {param: [allowed values]}}]`; `None` when the answer file
    /// has no entry for the id.
    pub answer: Option<Vec<Value>>,
}

/// Reads the first `limit` questions of `BFCL_v4_<category>.json` in file order, with their
/// possible answers.
pub fn load(dir: &Path, category: &str, limit: usize) -> Result<Vec<Question>, String> {
    let file = format!("BFCL_v4_{category}.json");
    let questions = read_jsonl(&dir.join(&file))?;
    let answers: HashMap<String, Vec<Value>> =
        read_jsonl(&dir.join("possible_answer").join(&file))?
            .into_iter()
            .filter_map(|a| {
                let id = a.get("id")?.as_str()?.to_string();
                let truth = a.get("ground_truth")?.as_array()?.clone();
                Some((id, truth))
            })
            .collect();
    let mut out = Vec::new();
    for (line, q) in questions.into_iter().take(limit).enumerate() {
        let bad = |what: &str| format!("{file} line {}: {what}", line + 1);
        let id = q
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no id"))?;
        let turn = q
            .pointer("/question/0")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no question"))?;
        let messages = turn
            .iter()
            .map(|m| {
                let field = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
                field("role")
                    .zip(field("content"))
                    .ok_or_else(|| bad("a message without role or content"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let functions = q
            .get("function")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no function list"))?
            .clone();
        out.push(Question {
            id: id.to_string(),
            messages,
            functions,
            answer: answers.get(id).cloned(),
        });
    }
    Ok(out)
}

fn read_jsonl(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// True when the call `name(arguments)` matches one of the ground truth's calls, as BFCL's
/// AST checker decides for a single call, simplified:
/// * the name is the expected function's;
/// * every argument is an expected parameter, and every parameter whose allowed values do
///   not include `""` (BFCL's mark of "may be omitted") is present;
/// * each value equals one allowed value: strings after BFCL's normalisation (lower case,
///   without spaces and `,./-_*^`), numbers by value (BFCL also rejects an integer where the
///   schema says float, and the reverse; this does not), lists element by element,
///   dictionaries key by key (their values being lists of allowed values again).
pub fn matches_answer(name: &str, arguments: &Value, ground_truth: &[Value]) -> bool {
    ground_truth.iter().any(|call| {
        call.get(name)
            .and_then(Value::as_object)
            .is_some_and(|params| params_match(arguments, params))
    })
}

fn params_match(arguments: &Value, params: &serde_json::Map<String, Value>) -> bool {
    let Some(args) = arguments.as_object() else {
        return false;
    };
    if args.keys().any(|k| !params.contains_key(k)) {
        return false;
    }
    params.iter().all(|(key, allowed)| {
        let allowed = allowed.as_array().map(Vec::as_slice).unwrap_or(&[]);
        match args.get(key) {
            None => allowed.iter().any(|v| v.as_str() == Some("")),
            Some(value) => allowed.iter().any(|a| value_matches(value, a)),
        }
    })
}

fn value_matches(value: &Value, expected: &Value) -> bool {
    match (value, expected) {
        (Value::String(a), Value::String(b)) => normalise(a) == normalise(b),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Null, Value::Null) => true,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| value_matches(x, y))
        }
        (Value::Object(_), Value::Object(b)) => params_match(value, b),
        _ => false,
    }
}

/// BFCL's `standardize_string`: lower case, without spaces and `,./-_*^`, `'` as `"`.
fn normalise(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .flat_map(char::to_lowercase)
        .map(|c| if c == '\'' { '"' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bfcl_answer_rules() {
        let truth = vec![json!({"calculate_triangle_area":
            {"base": [10], "height": [5], "unit": ["units", ""]}})];
        let ok = |args: Value| matches_answer("calculate_triangle_area", &args, &truth);
        assert!(ok(json!({"base": 10, "height": 5})));
        assert!(ok(json!({"base": 10.0, "height": 5, "unit": "Units"})));
        assert!(!ok(json!({"base": 10})), "a required parameter is missing");
        assert!(!ok(json!({"base": 10, "height": 6})));
        assert!(
            !ok(json!({"base": 10, "height": 5, "colour": "red"})),
            "unexpected argument"
        );
        assert!(
            !ok(json!({"base": "10", "height": 5})),
            "a string is not a number"
        );
        assert!(!matches_answer(
            "other",
            &json!({"base": 10, "height": 5}),
            &truth
        ));

        let truth = vec![json!({"f": {"cols": [["email", "ssn"], ["ssn", "email"]],
                                      "opts": [{"deep": [true, ""]}, ""]}})];
        assert!(matches_answer(
            "f",
            &json!({"cols": ["SSN", "e-mail"]}),
            &truth
        ));
        assert!(!matches_answer("f", &json!({"cols": ["ssn"]}), &truth));
        assert!(matches_answer(
            "f",
            &json!({"cols": ["ssn", "email"], "opts": {}}),
            &truth
        ));
        assert!(!matches_answer(
            "f",
            &json!({"cols": ["ssn", "email"], "opts": {"x": 1}}),
            &truth
        ));
    }

    #[test]
    fn normalisation_is_bfcl_s() {
        assert_eq!(normalise("New York, NY"), "newyorkny");
        assert_eq!(normalise("it's"), "it\"s");
    }
}
