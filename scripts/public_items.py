#!/usr/bin/env python3
"""Counts the crate's public API from rustdoc's JSON output (`--output-format json`).

An item counts once, however many paths reach it: every module, type, trait, function, constant,
static, macro and type alias reachable from the crate root through public modules and `pub use`,
plus the inherent methods and associated items of those types, the public fields of structs and
the variants of enums (each a name a user can write). Trait implementations (`impl Display for
..`) add no name and are not counted. Prints the root's names, the total, and one line per module.

It also checks that no counted item's signature (a function's arguments, return type and
bounds, a public field's type, an enum variant's fields, a trait's items) names a type of this
crate that is not itself counted: such a type (reachable only through the hidden `internals`, or
not at all) would still be part of the user's API, only unnamed and undocumented. Each one is
printed, and fails the run, unless named with `--allow-unnamed PATH` (a known case kept until
it is fixed, its reason beside the flag in .ci/run).

Usage: public_items.py target/doc/mcp_framing.json [--list] [--max-root N] [--max-items N]
       [--allow-unnamed PATH ...]

With --max-root or --max-items, exits 1 when the root has more names (modules among them) or the
crate more public items than that (issue 18: at most 40 names at the root).
"""
import json
import sys
from collections import Counter


def main() -> int:
    path = sys.argv[1]
    args = sys.argv[2:]
    listing = "--list" in args

    def limit(flag: str) -> int | None:
        return int(args[args.index(flag) + 1]) if flag in args else None

    max_root, max_items = limit("--max-root"), limit("--max-items")
    doc = json.load(open(path, encoding="utf-8"))
    index = doc["index"]
    item = lambda i: index.get(str(i))  # noqa: E731

    counted: dict[str, str] = {}  # id -> a path that reaches it
    variants: set[str] = set()

    def is_member(p: str) -> bool:
        return p in variants
    root_names = 0
    root_modules = 0

    def visit(item_id, path: str) -> None:
        it = item(item_id)
        if it is None or it["crate_id"] != 0:
            return  # an item of another crate re-exported: not ours to count
        kind, inner = next(iter(it["inner"].items()))
        if kind == "use":
            target = inner.get("id")
            if target is None:
                return
            name = inner["name"]
            if inner.get("is_glob"):
                target_item = item(target)
                if target_item and "module" in target_item["inner"]:
                    for child in target_item["inner"]["module"]["items"]:
                        visit(child, path)
                return
            visit_named(target, f"{path}::{name}")
            return
        visit_named(item_id, f"{path}::{it['name']}" if it.get("name") else path)

    def visit_named(item_id, path: str) -> None:
        it = item(item_id)
        if it is None or it["crate_id"] != 0:
            return
        key = str(item_id)
        if key in counted:
            return
        counted[key] = path
        kind, inner = next(iter(it["inner"].items()))
        if kind == "module":
            for child in inner["items"]:
                visit(child, path)
        elif kind == "struct":
            fields = inner["kind"].get("plain", {}).get("fields", []) if isinstance(inner["kind"], dict) else []
            tuple_fields = inner["kind"].get("tuple", []) if isinstance(inner["kind"], dict) else []
            for f in fields + [f for f in tuple_fields if f is not None]:
                f_it = item(f)
                if f_it and f_it.get("visibility") == "public":
                    counted[str(f)] = f"{path}.{f_it.get('name')}"
            impls(inner["impls"], path)
        elif kind == "enum":
            for v in inner["variants"]:
                v_it = item(v)
                counted[str(v)] = f"{path}::{v_it['name'] if v_it else '?'}"
                variants.add(counted[str(v)])
            impls(inner["impls"], path)
        elif kind == "union":
            impls(inner["impls"], path)
        elif kind == "trait":
            for child in inner["items"]:
                c = item(child)
                counted[str(child)] = f"{path}::{c['name'] if c else '?'}"

    def impls(ids, path: str) -> None:
        for impl_id in ids:
            imp = item(impl_id)
            if imp is None:
                continue
            inner = imp["inner"]["impl"]
            if inner.get("trait") is not None or inner.get("is_synthetic") or inner.get("blanket_impl"):
                continue
            for child in inner["items"]:
                c = item(child)
                if c is not None and c.get("visibility") == "public":
                    counted[str(child)] = f"{path}::{c['name']}"

    root = item(doc["root"])
    for child in root["inner"]["module"]["items"]:
        c = item(child)
        if c is not None and "module" not in c["inner"]:
            root_names += 1
        elif c is not None:
            root_modules += 1
        visit(child, "crate")

    per_module = Counter()
    for p in counted.values():
        parts = p.split("::")
        per_module["::".join(parts[:2]) if len(parts) > 2 else "crate"] += 1
    members = sum(1 for p in counted.values() if "." in p or is_member(p))
    print(
        f"public items: {len(counted)} (names at the crate root: {root_names}, and "
        f"{root_modules} modules; struct fields and enum variants among them: {members})"
    )
    for module, n in sorted(per_module.items(), key=lambda kv: -kv[1]):
        print(f"  {module}: {n}")
    if listing:
        for p in sorted(counted.values()):
            print(p)
    # Every crate-local type a counted item's signature names must be counted too.
    paths = doc.get("paths", {})

    def named(node, found: set) -> None:
        if isinstance(node, dict):
            if "id" in node and "path" in node and isinstance(node["id"], int):
                found.add(str(node["id"]))
            for value in node.values():
                named(value, found)
        elif isinstance(node, list):
            for value in node:
                named(value, found)

    unnamed: dict[str, set] = {}
    for key, where in counted.items():
        it = item(key)
        if it is None:
            continue
        kind, inner = next(iter(it["inner"].items()))
        if kind in ("module", "use", "impl"):
            continue
        found: set = set()
        if kind == "struct":
            named(inner.get("generics"), found)  # fields are counted items of their own
        elif kind == "enum":
            named(inner.get("generics"), found)
        elif kind == "variant":
            fields = inner.get("kind", {})
            ids = fields.get("tuple", []) if isinstance(fields, dict) else []
            ids += fields.get("struct", {}).get("fields", []) if isinstance(fields, dict) else []
            for field in ids:
                if field is not None and item(field) is not None:
                    named(item(field)["inner"], found)
        else:
            named(inner, found)
        for ref in found:
            if ref in counted:
                continue
            info = paths.get(ref) or {}
            local = info.get("crate_id", item(ref)["crate_id"] if item(ref) else None) == 0
            if local and info.get("kind") not in ("generic", "primitive"):
                target = "::".join(info.get("path", [ref]))
                unnamed.setdefault(target, set()).add(where)
    allowed = {args[i + 1] for i, a in enumerate(args) if a == "--allow-unnamed" and i + 1 < len(args)}
    failed = False
    for target, users in sorted(unnamed.items()):
        if target in allowed:
            print(f"  allowed (--allow-unnamed): {target}, named by {len(users)} public items")
            continue
        print(f"public_items.py: {target} is named by the public API but not public: "
              f"{', '.join(sorted(users))}", file=sys.stderr)
        failed = True
    if max_root is not None and root_names + root_modules > max_root:
        print(f"public_items.py: {root_names + root_modules} names at the crate root "
              f"(modules included), more than {max_root}", file=sys.stderr)
        failed = True
    if max_items is not None and len(counted) > max_items:
        print(f"public_items.py: {len(counted)} public items, more than {max_items}", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
