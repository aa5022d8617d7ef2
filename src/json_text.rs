//! Edits of JSON text that leave every other byte as it was: find where a member of an object
//! is, replace its value or add one (the layer's declaration in a discovery result, SPEC.md
//! §11.2). Parsing and printing the document again would change member order, number spelling and
//! escapes the handler chose; these edits splice one piece of text in.

use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The text is not a JSON object where one was expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NotAnObject;

/// One edit: `text[range]` becomes `with`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Splice {
    pub(crate) range: Range<usize>,
    pub(crate) with: String,
}

impl Splice {
    /// `text` with the edit made.
    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() - self.range.len() + self.with.len());
        out.push_str(&text[..self.range.start]);
        out.push_str(&self.with);
        out.push_str(&text[self.range.end..]);
        out
    }
}

/// What [`locate`] found at the end of a path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The member exists: its value is `text[range]`.
    Value(Range<usize>),
    /// The path stops short: this edit adds the missing members, the last one's value `value`.
    Missing(Splice),
}

/// Follows `path` from the JSON object `text` (which must be exactly one JSON value), member by
/// member; where a member appears twice, the last one counts, as a JSON reader keeps it. Returns
/// the last member's value, or the edit that adds the members from the first missing one on,
/// with `value` (JSON text) as the last one's value.
pub(crate) fn locate(text: &str, path: &[&str], value: &str) -> Result<Found, NotAnObject> {
    let mut object = 0..text.len();
    for (depth, key) in path.iter().enumerate() {
        let members = members(text, object.clone())?;
        let Some(member) = members.iter().rev().find(|m| m.key == *key) else {
            // Insert after the last member's value, or right after the `{` of an empty object.
            let (at, comma) = match members.last() {
                Some(last) => (last.value.end, ","),
                None => (opening_brace(text, &object) + 1, ""),
            };
            let mut with = String::from(comma);
            for key in &path[depth..] {
                push_key(&mut with, key);
            }
            with.push_str(value);
            with.extend(std::iter::repeat_n('}', path.len() - depth - 1));
            return Ok(Found::Missing(Splice {
                range: at..at,
                with,
            }));
        };
        if depth + 1 == path.len() {
            return Ok(Found::Value(member.value.clone()));
        }
        object = member.value.clone();
    }
    Err(NotAnObject)
}

/// `"key":{` for every key but the last, `"key":` for the last (written by `locate`).
fn push_key(out: &mut String, key: &str) {
    if !out.is_empty() && !out.ends_with(',') {
        out.push('{');
    }
    out.push_str(&serde_json::to_string(key).expect("a string serializes"));
    out.push(':');
}

/// Where the `{` of the object `text[span]` is (after leading white space).
fn opening_brace(text: &str, span: &Range<usize>) -> usize {
    span.start + text[span.clone()].find('{').unwrap_or(0)
}

/// A member of an object: its key as JSON reads it (escapes resolved) and its value's span.
#[derive(Debug)]
struct Member {
    key: String,
    value: Range<usize>,
}

/// The members of the JSON object `text[span]` in order, if it is exactly one JSON object.
fn members(text: &str, span: Range<usize>) -> Result<Vec<Member>, NotAnObject> {
    let piece = &text[span.clone()];
    let mut de = serde_json::Deserializer::from_str(piece);
    let members = de
        .deserialize_map(Members {
            base: piece.as_ptr() as usize,
            offset: span.start,
        })
        .map_err(|_| NotAnObject)?;
    de.end().map_err(|_| NotAnObject)?;
    Ok(members)
}

/// Reads an object's members; each value is borrowed from the input, so where it lies is its
/// address less the input's.
struct Members {
    /// Address of the text parsed.
    base: usize,
    /// Where that text starts in the whole document.
    offset: usize,
}

impl<'de> Visitor<'de> for Members {
    type Value = Vec<Member>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Member>, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let raw: &'de RawValue = map.next_value()?;
            let value = raw.get();
            // A borrowed `RawValue` is a slice of the input (serde_json reads `&str` in place).
            let start = (value.as_ptr() as usize)
                .checked_sub(self.base)
                .ok_or_else(|| de::Error::custom("a value outside the input"))?;
            let start = self.offset + start;
            members.push(Member {
                key,
                value: start..start + value.len(),
            });
        }
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT: &str = r#"{"versions":[1]}"#;
    const PATH: [&str; 4] = ["result", "capabilities", "experimental", "k"];

    fn declared(text: &str) -> String {
        match locate(text, &PATH, CONTRACT).unwrap() {
            Found::Missing(splice) => splice.apply(text),
            Found::Value(range) => Splice {
                range,
                with: CONTRACT.to_owned(),
            }
            .apply(text),
        }
    }

    #[test]
    fn missing_members_are_added_after_the_last_one_and_nothing_else_changes() {
        let cases = [
            (
                r#"{"id":1,"result":{"capabilities":{}}}"#,
                r#"{"id":1,"result":{"capabilities":{"experimental":{"k":{"versions":[1]}}}}}"#,
            ),
            (
                r#"{"id":1,"result":{"a":1.50,"capabilities":{"tools":{}},"z":"\u00e9"}}"#,
                r#"{"id":1,"result":{"a":1.50,"capabilities":{"tools":{},"experimental":{"k":{"versions":[1]}}},"z":"\u00e9"}}"#,
            ),
            (
                "{ \"result\" : { \"capabilities\" : { \"experimental\" : { } } } }",
                "{ \"result\" : { \"capabilities\" : { \"experimental\" : {\"k\":{\"versions\":[1]} } } } }",
            ),
            (
                r#"{"result":{"x":true}}"#,
                r#"{"result":{"x":true,"capabilities":{"experimental":{"k":{"versions":[1]}}}}}"#,
            ),
            (
                r#"{"result":{}}"#,
                r#"{"result":{"capabilities":{"experimental":{"k":{"versions":[1]}}}}}"#,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(declared(text), expected);
            serde_json::from_str::<serde_json::Value>(&declared(text)).unwrap();
        }
    }

    #[test]
    fn an_existing_member_is_found_the_last_of_its_name() {
        let text = r#"{"result":{"capabilities":{"experimental":{"k":1,"k":{"old":true}}}}}"#;
        let Found::Value(range) = locate(text, &PATH, CONTRACT).unwrap() else {
            panic!("found")
        };
        assert_eq!(&text[range], r#"{"old":true}"#);
        // An escaped key is the key it spells.
        let text = r#"{"result":{"capabilities":{"experimental":{"\u006b":[]}}}}"#;
        let Found::Value(range) = locate(text, &PATH, CONTRACT).unwrap() else {
            panic!("found")
        };
        assert_eq!(&text[range], "[]");
    }

    #[test]
    fn text_that_is_not_an_object_on_the_path_is_refused() {
        for text in [
            r#"{"result":[]}"#,
            r#"{"result":{"capabilities":null}}"#,
            r#"{"result":{"capabilities":{"experimental":"x"}}}"#,
            r#"{"result":{}} trailing"#,
            r#"{"result":{"#,
            "[1]",
        ] {
            assert_eq!(locate(text, &PATH, CONTRACT), Err(NotAnObject), "{text}");
        }
    }
}
