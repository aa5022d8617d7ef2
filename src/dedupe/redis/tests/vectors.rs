//! The Redis record format every implementation shares (SPEC.md §17.12.1), checked against the
//! vectors in `tests/vectors/store/` (the derivations that need no Redis, store keys and
//! fingerprints, are checked in `dedupe/vectors.rs`): every script operation, run both as the
//! script files themselves (`EVALSHA`, as another language's implementation sends them) and
//! through `RedisStore`, against a real `redis-server` on a free loopback port, down to the fields
//! it leaves in Redis (`HGETALL`) and their TTLs. The server binary must be installed
//! (`scripts/test` does it): a missing one fails the tests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

use crate::dedupe::fingerprint::Fingerprint;
use crate::dedupe::scope::{Scope, StoreKey};
use crate::dedupe::store::{ClaimOutcome, ClaimRequest, Completed, FencingToken, StoredResponse};
use crate::dedupe::{
    DedupeStore, Decision, Deduplicator, FingerprintRules, KeyedCall, LeaseExpiry, Principal,
    RedisStore, parse_request_json,
};
use crate::test_support::redis_servers::RedisServer;
use crate::test_support::store_vectors::{hex_bytes, principal, text, vectors};

// ---------------------------------------------------------------------------------------------
// Against a real redis-server.

struct Redis {
    _server: RedisServer,
    raw: MultiplexedConnection,
    store: RedisStore,
}

async fn redis() -> Redis {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let raw = client.get_multiplexed_async_connection().await.unwrap();
    let store = RedisStore::builder(server.url())
        .response_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the test redis-server");
    Redis {
        _server: server,
        raw,
        store,
    }
}

impl Redis {
    /// The server's clock in milliseconds, as the scripts read it.
    async fn now(&mut self) -> i64 {
        let (seconds, micros): (i64, i64) =
            redis::cmd("TIME").query_async(&mut self.raw).await.unwrap();
        seconds * 1000 + micros / 1000
    }

    async fn fields(&mut self, key: &str) -> HashMap<String, Vec<u8>> {
        redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .unwrap()
    }

    async fn pttl(&mut self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .unwrap()
    }

    /// Writes a vector's `before` record (times relative to the server's clock now); returns
    /// the fields as written and when the TTL was set.
    async fn set(&mut self, key: &str, before: &Value) -> Option<Written> {
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .unwrap();
        if before.is_null() {
            return None;
        }
        let now = self.now().await;
        let mut fields = HashMap::new();
        for (name, value) in before["fields"].as_object().unwrap() {
            let bytes = match value.get("now_plus_ms") {
                Some(offset) => (now + offset.as_i64().unwrap()).to_string().into_bytes(),
                None => text(value).as_bytes().to_vec(),
            };
            fields.insert(name.clone(), bytes);
        }
        let mut hset = redis::cmd("HSET");
        hset.arg(key);
        for (name, value) in &fields {
            hset.arg(name).arg(value);
        }
        let _: () = hset.query_async(&mut self.raw).await.unwrap();
        let pttl = before["pttl_ms"].as_i64().unwrap();
        // Before the TTL is set: the TTL counts down from no earlier than this.
        let set_at = self.now().await;
        let _: () = redis::cmd("PEXPIRE")
            .arg(key)
            .arg(pttl)
            .query_async(&mut self.raw)
            .await
            .unwrap();
        Some(Written {
            fields,
            pttl,
            set_at,
        })
    }

    /// Checks the record at `key` against a vector's `after` (a record, `"unchanged"`, or null
    /// for no record), the operation having run between the server times `t0` and `t1`.
    async fn check_after(
        &mut self,
        name: &str,
        key: &str,
        after: &Value,
        before: Option<&Written>,
        (t0, t1): (i64, i64),
        tokens: &mut HashMap<String, Vec<u8>>,
    ) {
        let fields = self.fields(key).await;
        let pttl = self.pttl(key).await;
        let t2 = self.now().await;
        let before_pttl = |what: &str| {
            let before = before.unwrap_or_else(|| panic!("{name}: {what} needs a record before"));
            (before.pttl, before.set_at)
        };
        let check_unchanged_ttl = |pttl: i64| {
            let (set, set_at) = before_pttl("an unchanged TTL");
            assert!(
                pttl <= set && pttl >= set - (t2 - set_at) - 2,
                "{name}: TTL {pttl} ms, set to {set} ms {} ms ago",
                t2 - set_at
            );
        };
        if after.is_null() {
            assert!(fields.is_empty(), "{name}: no record expected, {fields:?}");
            return;
        }
        if after == "unchanged" {
            let before = before.expect("unchanged needs a record before");
            assert_eq!(fields, before.fields, "{name}: record changed");
            check_unchanged_ttl(pttl);
            return;
        }
        let expected = after["fields"].as_object().unwrap();
        let mut names: Vec<&String> = fields.keys().collect();
        names.sort();
        let mut expected_names: Vec<&String> = expected.keys().collect();
        expected_names.sort();
        assert_eq!(names, expected_names, "{name}: fields");
        for (field, value) in expected {
            let actual = &fields[field];
            if let Some(offset) = value.get("now_plus_ms") {
                let offset = offset.as_i64().unwrap();
                let at: i64 = std::str::from_utf8(actual).unwrap().parse().unwrap();
                assert_eq!(
                    at.to_string().as_bytes(),
                    &actual[..],
                    "{name}: {field} decimal"
                );
                assert!(
                    (t0 + offset..=t1 + offset).contains(&at),
                    "{name}: {field} = {at}, expected now + {offset} with now in {t0}..={t1}"
                );
            } else if let Some(label) = value.get("token") {
                assert!(
                    actual.len() == 32
                        && actual
                            .iter()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)),
                    "{name}: {field} is a token in 32 lowercase hex digits: {actual:?}"
                );
                let first = tokens
                    .entry(text(label).to_owned())
                    .or_insert(actual.clone());
                assert_eq!(first, actual, "{name}: {field} is the {label} token");
            } else {
                assert_eq!(
                    String::from_utf8_lossy(actual),
                    text(value),
                    "{name}: field {field}"
                );
            }
        }
        match &after["pttl_ms"] {
            Value::String(s) if s == "unchanged" => check_unchanged_ttl(pttl),
            ttl => {
                let ttl = ttl.as_i64().unwrap();
                assert!(
                    pttl <= ttl && pttl >= ttl - (t2 - t0) - 2,
                    "{name}: TTL {pttl} ms, expected {ttl} ms set within the last {} ms",
                    t2 - t0
                );
            }
        }
    }
}

struct Written {
    fields: HashMap<String, Vec<u8>>,
    pttl: i64,
    set_at: i64,
}

/// A script's reply, from Redis itself or from what `RedisStore` made of it.
#[derive(Debug, PartialEq)]
enum Item {
    Text(Vec<u8>),
    Int(i64),
}

fn raw_reply(value: redis::Value) -> Vec<Item> {
    let item = |value: redis::Value| match value {
        redis::Value::Int(i) => Item::Int(i),
        redis::Value::BulkString(bytes) => Item::Text(bytes),
        other => panic!("unexpected reply element {other:?}"),
    };
    match value {
        redis::Value::Array(items) => items.into_iter().map(item).collect(),
        other => vec![item(other)],
    }
}

fn check_reply(
    name: &str,
    reply: &[Item],
    expected: &Value,
    before: Option<&Written>,
    t: (i64, i64),
) {
    let expected: Vec<&Value> = match expected {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    };
    assert_eq!(reply.len(), expected.len(), "{name}: reply {reply:?}");
    for (item, expected) in reply.iter().zip(expected) {
        match (item, expected) {
            (Item::Int(i), Value::Number(n)) => assert_eq!(Some(*i), n.as_i64(), "{name}"),
            (Item::Text(bytes), Value::String(s)) => {
                assert_eq!(String::from_utf8_lossy(bytes), *s, "{name}");
            }
            (Item::Int(left), Value::Object(o)) => {
                let field = text(&o["ms_until"]);
                let written = &before.expect("ms_until needs a record before").fields[field];
                let at: i64 = std::str::from_utf8(written).unwrap().parse().unwrap();
                assert!(
                    (at - t.1..=at - t.0).contains(left),
                    "{name}: {left} ms left, expected {field} - now with now in {}..={}",
                    t.0,
                    t.1
                );
            }
            _ => panic!("{name}: reply element {item:?}, expected {expected}"),
        }
    }
}

/// `RedisStore`'s answer to a vector's operation, as the script's reply would read.
async fn through_store(
    store: &RedisStore,
    key: &StoreKey,
    script: &str,
    argv: &[&str],
) -> Vec<Item> {
    let token = |i: usize| FencingToken::from_u128(u128::from_str_radix(argv[i], 16).unwrap());
    let millis = |i: usize| Duration::from_millis(argv[i].parse().unwrap());
    let flag = |done: bool| vec![Item::Int(i64::from(done))];
    let tag = |s: &str| Item::Text(s.as_bytes().to_vec());
    match script {
        "claim" => {
            let request = ClaimRequest {
                fingerprint: Fingerprint::from_bytes(hex_bytes(argv[0])),
                token: token(1),
                lease: millis(2),
                retention: millis(3),
                on_expired_lease: if argv[4] == "1" {
                    LeaseExpiry::Reexecute
                } else {
                    LeaseExpiry::Refuse
                },
            };
            match store.claim(key, &request).await.expect("claim") {
                ClaimOutcome::Claimed { generation } => {
                    vec![tag("claimed"), Item::Int(generation as i64)]
                }
                ClaimOutcome::Conflict { stored } => {
                    vec![tag("conflict"), tag(&stored.to_string())]
                }
                ClaimOutcome::InFlight { lease_remaining } => {
                    vec![
                        tag("in_flight"),
                        Item::Int(lease_remaining.as_millis() as i64),
                    ]
                }
                ClaimOutcome::Abandoned => vec![tag("abandoned")],
                ClaimOutcome::Completed(Completed::Stored(StoredResponse::Result(json))) => {
                    vec![tag("done"), tag("r"), Item::Text(json.to_vec())]
                }
                ClaimOutcome::Completed(Completed::Stored(StoredResponse::Error(json))) => {
                    vec![tag("done"), tag("e"), Item::Text(json.to_vec())]
                }
                ClaimOutcome::Completed(Completed::NotStored { size }) => {
                    vec![tag("done"), tag("n"), tag(&size.to_string())]
                }
            }
        }
        "renew" => flag(store.renew(key, token(0), millis(1)).await.expect("renew")),
        "complete" => {
            let payload = bytes::Bytes::copy_from_slice(argv[2].as_bytes());
            let outcome = match argv[1] {
                "r" => Completed::Stored(StoredResponse::Result(payload)),
                "e" => Completed::Stored(StoredResponse::Error(payload)),
                _ => Completed::NotStored {
                    size: argv[2].parse().unwrap(),
                },
            };
            flag(
                store
                    .complete(key, token(0), &outcome, millis(3))
                    .await
                    .expect("complete"),
            )
        }
        "release" => flag(store.release(key, token(0)).await.expect("release")),
        other => panic!("unknown script {other}"),
    }
}

fn script_text(file: &Value, script: &str) -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(text(&file["scripts"][script]["file"]));
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn the_script_files_have_the_vectors_sha1_on_one_server_and_in_a_cluster() {
    let file = vectors("scripts.json");
    let mut redis = redis().await;
    for script in ["claim", "renew", "complete", "release"] {
        let code = script_text(&file, script);
        // The file is the text SPEC.md §17.12.1 shows, with one final line feed.
        let spec =
            std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("SPEC.md"))
                .unwrap();
        assert!(
            spec.contains(&format!("```lua\n{code}```\n")),
            "{script}: SPEC.md shows another text"
        );
        for (variant, text_sent) in [
            ("sha1", code.clone()),
            ("cluster_sha1", format!("#!lua\n{code}")),
        ] {
            let sha1: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(&text_sent)
                .query_async(&mut redis.raw)
                .await
                .unwrap();
            assert_eq!(
                sha1,
                text(&file["scripts"][script][variant]),
                "{script} {variant}"
            );
        }
    }
}

/// Runs every operation of `scripts.json` on a record it sets up first, either as the script
/// file sent by its SHA-1 (`raw`) or through `RedisStore`, and checks the reply and the record.
async fn run_operations(raw: bool) {
    let file = vectors("scripts.json");
    let mut redis = redis().await;
    let store_key = Scope::new(Principal::anonymous(), "tools/call", Some("t"))
        .store_key("5f2b0c8a9d1e4f3a8b7c6d5e4f3a2b1c".parse().unwrap());
    let key = redis.store.redis_key(&store_key);
    let operations = file["operations"].as_array().unwrap();
    assert!(operations.len() >= 25);
    for script in ["claim", "renew", "complete", "release"] {
        let covered = operations
            .iter()
            .filter(|op| op["script"] == script)
            .count();
        assert!(covered >= 4, "{script}: {covered} vectors");
    }
    for op in operations {
        let name = text(&op["name"]);
        let script = text(&op["script"]);
        let argv: Vec<&str> = op["argv"].as_array().unwrap().iter().map(text).collect();
        let before = redis.set(&key, &op["before"]).await;
        let t0 = redis.now().await;
        let reply = if raw {
            let mut eval = redis::cmd("EVALSHA");
            eval.arg(text(&file["scripts"][script]["sha1"]))
                .arg(1)
                .arg(&key);
            for arg in &argv {
                eval.arg(*arg);
            }
            let reply = match eval.query_async(&mut redis.raw).await {
                Ok(reply) => reply,
                Err(err)
                    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    let mut eval = redis::cmd("EVAL");
                    eval.arg(script_text(&file, script)).arg(1).arg(&key);
                    for arg in &argv {
                        eval.arg(*arg);
                    }
                    eval.query_async(&mut redis.raw).await.unwrap()
                }
                Err(err) => panic!("{name}: {err}"),
            };
            raw_reply(reply)
        } else {
            through_store(&redis.store, &store_key, script, &argv).await
        };
        let t1 = redis.now().await;
        check_reply(name, &reply, &op["reply"], before.as_ref(), (t0, t1));
        redis
            .check_after(
                name,
                &key,
                &op["after"],
                before.as_ref(),
                (t0, t1),
                &mut HashMap::new(),
            )
            .await;
    }
}

#[tokio::test]
async fn every_script_file_answers_and_writes_as_the_vectors_say() {
    run_operations(true).await;
}

#[tokio::test]
async fn redis_store_answers_and_writes_as_the_vectors_say() {
    run_operations(false).await;
}

#[tokio::test]
async fn a_call_claimed_and_completed_leaves_the_record_the_vectors_give_and_is_replayed() {
    let file = vectors("calls.json");
    let mut redis = redis().await;
    for case in file["calls"].as_array().unwrap() {
        let name = text(&case["name"]);
        let millis = |field: &str| Duration::from_millis(case[field].as_u64().unwrap());
        let dedup = Deduplicator::new(redis.store.clone())
            .lease(millis("lease_ms"))
            .window(millis("window_ms"))
            .max_result_bytes(case["max_result_bytes"].as_u64().unwrap() as usize)
            .wait(Duration::ZERO);
        let principal = principal(&json!({"authorization": case["authorization"]}));
        let mut request = parse_request_json(text(&case["request"]).as_bytes()).unwrap();
        let rules = FingerprintRules::default();
        let call = KeyedCall::from_request(principal, None, &request, &rules)
            .unwrap()
            .expect("a keyed call");
        assert_eq!(
            call.fingerprint().to_string(),
            text(&case["fingerprint"]),
            "{name}"
        );
        let key = redis.store.redis_key(&call.store_key());
        assert_eq!(key, text(&case["redis_key"]), "{name}");

        let mut tokens = HashMap::new();
        let t0 = redis.now().await;
        let Decision::Execute(guard) = dedup.begin(&call).await else {
            panic!("{name}: the first attempt executes")
        };
        let t1 = redis.now().await;
        redis
            .check_after(
                name,
                &key,
                &case["after_claim"],
                None,
                (t0, t1),
                &mut tokens,
            )
            .await;
        let t0 = redis.now().await;
        guard
            .complete(text(&case["response"]).as_bytes())
            .await
            .expect("recorded");
        let t1 = redis.now().await;
        redis
            .check_after(
                name,
                &key,
                &case["after_completion"],
                None,
                (t0, t1),
                &mut tokens,
            )
            .await;

        request["id"] = case["retry_id"].clone();
        let retry = KeyedCall::from_request(principal, None, &request, &rules)
            .unwrap()
            .unwrap();
        match (dedup.begin(&retry).await, &case["replay"]) {
            (Decision::Replay(stored), Value::String(replay)) => {
                assert_eq!(&stored.to_response(&case["retry_id"]), replay, "{name}");
            }
            (Decision::Refused(refusal), Value::Null) => {
                // As the caller reads it: the data entry of the refusal's JSON-RPC error.
                let error = refusal.to_error(retry.request_key());
                let data = &error["data"]["io.github.mcp-framing/dedupe"];
                assert_eq!(case["refusal"]["reason"], "result_not_stored", "{name}");
                assert_eq!(data["reason"], case["refusal"]["reason"], "{name}");
                assert_eq!(
                    data["resultBytes"], case["refusal"]["resultBytes"],
                    "{name}"
                );
            }
            (decision, _) => panic!("{name}: the retry got {decision:?}"),
        }
    }
}

/// The packages that ship their own copy of the scripts (they cannot read the crate's files at
/// run time), each as a folder of `<script>.lua` files.
const SCRIPT_COPIES: &[&str] = &["python/src/mcp_framing/server/redis_scripts"];

#[test]
fn every_package_ships_the_script_files_byte_for_byte() {
    let file = vectors("scripts.json");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for folder in SCRIPT_COPIES {
        for script in ["claim", "renew", "complete", "release"] {
            let copy = root.join(folder).join(format!("{script}.lua"));
            let copied = std::fs::read_to_string(&copy)
                .unwrap_or_else(|err| panic!("{}: {err}", copy.display()));
            assert!(
                copied == script_text(&file, script),
                "{} differs from the crate's {script}.lua (SPEC.md §17.12.1)",
                copy.display()
            );
        }
    }
}
