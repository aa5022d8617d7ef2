//! `jsonrpc::is_response`: the top-level keys of one JSON object decide, read without a JSON tree
//! (issue 14); it agrees with the `serde_json::Value` reading it replaces.

use mcp_framing::internals::jsonrpc::is_response;
use proptest::prelude::*;

/// The definition it replaces: parse into a `Value`, look at the top level.
fn by_value(message: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(message).is_ok_and(|message| {
        message.get("id").is_some()
            && (message.get("result").is_some() || message.get("error").is_some())
    })
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
