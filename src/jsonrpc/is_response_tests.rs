//! `jsonrpc::is_response`: the top-level keys of one JSON object decide, read without a JSON tree
//! (issue 14); it agrees with the `serde_json::Value` reading it replaces, and with serde_json's
//! own reading of the top-level keys (its values skipped) on any text, valid or not (issue 21: the
//! crate's one-pass scan decides the usual message, serde_json the rest).

use super::is_response;
use proptest::prelude::*;

/// The definition it replaces: parse into a `Value`, look at the top level.
fn by_value(message: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(message).is_ok_and(|message| {
        message.get("id").is_some()
            && (message.get("result").is_some() || message.get("error").is_some())
    })
}

/// serde_json reading the top-level keys and skipping every value (what `is_response` was before
/// its scan of issue 21, and still is where the scan leaves a text to it).
fn by_serde(message: &str) -> bool {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct TopLevel;
    impl<'de> Visitor<'de> for TopLevel {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let (mut id, mut outcome) = (false, false);
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "id" => id = true,
                    "result" | "error" => outcome = true,
                    _ => {}
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(id && outcome)
        }
    }
    let mut de = serde_json::Deserializer::from_str(message);
    matches!(de.deserialize_map(TopLevel), Ok(true)) && de.end().is_ok()
}

#[test]
fn reads_only_the_top_level_keys_of_one_json_object() {
    let cases: &[(&str, bool)] = &[
        // Responses.
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
        (
            r#"{"result":{"content":[]},"id":"a","jsonrpc":"2.0"}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
            true,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"result":null}"#, true),
        (" \n{ \"id\" : 7 , \"error\" : 1 }\r\n ", true),
        // Escaped key names are the keys JSON reads.
        (r#"{"\u0069d":1,"\u0072esult":{}}"#, true),
        (r#"{"i\u0064":1,"error":{}}"#, true),
        // Duplicate keys: present is present.
        (r#"{"id":1,"id":2,"result":{}}"#, true),
        // Not responses: requests, notifications.
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}"#,
            false,
        ),
        (r#"{"id":1}"#, false),
        (r#"{"result":{}}"#, false),
        (r#"{"error":{}}"#, false),
        // Keys inside nested values do not count.
        (
            r#"{"jsonrpc":"2.0","method":"m","params":{"id":1,"result":2}}"#,
            false,
        ),
        (r#"{"method":"m","params":[{"id":1,"error":{}}]}"#, false),
        (r#"{"id":1,"params":{"result":{}}}"#, false),
        (r#"{"result":{},"params":{"id":1}}"#, false),
        (r#"{"a":{"b":{"c":[{"id":1,"result":[]}]}},"id":1}"#, false),
        // Keys inside strings do not count.
        (
            r#"{"method":"m","params":{"text":"\"id\":1,\"result\":{}"}}"#,
            false,
        ),
        (r#"{"id":1,"note":"\"result\": 1"}"#, false),
        (r#"{"id\"":1,"result":{}}"#, false),
        // Near misses.
        (r#"{"ids":1,"result":{}}"#, false),
        (r#"{"id":1,"results":{}}"#, false),
        (r#"{"Id":1,"Result":{}}"#, false),
        // Not one valid JSON object.
        (r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#, false),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}"#, false),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}} {}"#, false),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}x"#, false),
        (r#"{"id":1,"result":{"a":tru}}"#, false),
        (r#"{"id":1,"result":"\x"}"#, false),
        (r#"{"id":1,"result":"cut"#, false),
        ("\"id\"", false),
        ("null", false),
        ("", false),
    ];
    for (message, expected) in cases {
        assert_eq!(is_response(message), *expected, "{message}");
        assert_eq!(
            by_serde(message),
            *expected,
            "the serde reading of {message}"
        );
        assert_eq!(
            by_value(message),
            *expected,
            "the Value reading of {message}"
        );
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let key = prop_oneof![
        Just("id".to_owned()),
        Just("result".to_owned()),
        Just("error".to_owned()),
        Just("method".to_owned()),
        "[a-z\"\\\\]{0,4}",
    ];
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        "(id|result|error|\"|\\\\|[a-z ]){0,6}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn agrees_with_the_value_reading(value in json_value()) {
        let message = value.to_string();
        prop_assert_eq!(is_response(&message), by_value(&message));
        // And on every cut of it, which is never one complete object.
        for cut in 0..message.len() {
            if message.is_char_boundary(cut) {
                prop_assert_eq!(is_response(&message[..cut]), by_value(&message[..cut]));
            }
        }
    }
}

/// JSON text as a sender may write it: white space anywhere it may go, every number form,
/// escapes (`\u` ones too), long strings, nesting deeper than the scan follows.
fn json_text() -> impl Strategy<Value = String> {
    let ws = prop_oneof![Just(""), Just(" "), Just("\n\t\r ")];
    let string = prop_oneof![
        "(id|result|error|method|[a-z \u{e9}\u{1f600}]){0,6}".prop_map(|s| format!("\"{s}\"")),
        Just(r#""\"\\\/\b\f\n\r\t\u00e9\uD83D\ude00\ud800""#.to_owned()),
        (0usize..300).prop_map(|n| format!("\"{}\"", "a".repeat(n))),
        Just(r#""\u0069d""#.to_owned()),
    ];
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?",
        Just("1e400".to_owned()),
        string.clone(),
        string.clone(),
        // Near misses, which neither reading accepts.
        prop::sample::select(vec![
            "01",
            "-",
            "-01",
            "1.",
            "1e",
            "1.e3",
            ".5",
            "+1",
            "tru",
            "nul",
            "falsey",
            r#""\x""#,
            r#""\u12g4""#,
            "\"\u{1}\"",
            "\"cut"
        ])
        .prop_map(str::to_owned),
    ];
    let leaf = (leaf, ws.clone()).prop_map(|(v, w)| format!("{w}{v}{w}"));
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((string.clone(), inner.clone()), 0..5).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
            (1usize..80, inner).prop_map(|(n, v)| format!("{}{v}{}", "[".repeat(n), "]".repeat(n))),
        ]
    })
}

/// A JSON-RPC-like object around generated members, with the keys that decide among them.
fn message_text() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just(r#""id""#.to_owned()),
        Just(r#""result""#.to_owned()),
        Just(r#""error""#.to_owned()),
        Just(r#""method""#.to_owned()),
        Just(r#""\u0069d""#.to_owned()),
        "\"[a-z]{0,3}\"",
    ];
    // Half of them responses but for what the values hold, so that a value read wrongly flips
    // the answer.
    let members = prop::collection::vec((key, json_text()), 0..5);
    (members, any::<bool>(), any::<prop::sample::Index>()).prop_map(|(members, respond, at)| {
        let mut members: Vec<String> = members
            .into_iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        if respond {
            members.insert(0, r#""id":1"#.to_owned());
            members.insert(at.index(members.len() + 1), r#""result":{}"#.to_owned());
        }
        format!("{{{}}}", members.join(","))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The scan decides only what serde_json decides the same: on valid messages, their cuts,
    /// and texts with one byte replaced by a JSON-significant one, inserted or removed.
    #[test]
    fn agrees_with_serde_json_on_any_text(
        message in message_text(),
        at in any::<prop::sample::Index>(),
        byte in prop::sample::select(b"{}[]:,\"\\ 0-.eE+tfnux\x01".to_vec()),
        edit in 0u8..3,
    ) {
        prop_assert_eq!(is_response(&message), by_serde(&message), "{}", message);
        for cut in (0..message.len()).filter(|&cut| message.is_char_boundary(cut)) {
            prop_assert_eq!(is_response(&message[..cut]), by_serde(&message[..cut]));
        }
        // Every bracket of the other kind, every colon a comma and back.
        for (at, &b) in message.as_bytes().iter().enumerate() {
            let swapped = match b {
                b'{' => b'[',
                b'[' => b'{',
                b'}' => b']',
                b']' => b'}',
                b':' => b',',
                b',' => b':',
                _ => continue,
            };
            let mut bytes = message.clone().into_bytes();
            bytes[at] = swapped;
            let edited = String::from_utf8(bytes).expect("an ASCII byte for another");
            prop_assert_eq!(is_response(&edited), by_serde(&edited), "{}", edited);
        }
        let mut bytes = message.clone().into_bytes();
        let at = at.index(bytes.len() + 1);
        match edit {
            0 if at < bytes.len() => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {}
        }
        // Only texts that are UTF-8 (`is_response` takes a `&str`).
        if let Ok(edited) = String::from_utf8(bytes) {
            prop_assert_eq!(is_response(&edited), by_serde(&edited), "{}", edited);
        }
    }
}
