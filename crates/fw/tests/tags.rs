//! pf's `tag` and `tagged` (pf.conf(5)): the syntax and its errors, and the tag a pass
//! leaves as the reference evaluator and the compiled classifier (both engines) give it.

use std::path::Path;

use fw::classifier::{BuildOptions, Classifier, Engine};
use fw::packet::{Dir, PacketKey, proto};
use fw::reference::evaluate;
use fw::rules::{MAX_TAGS, RuleSet, parse};

fn ifaces(name: &str) -> Option<u16> {
    name.strip_prefix("em").and_then(|i| i.parse().ok())
}

fn ok(text: &str) -> RuleSet {
    parse(text, Path::new("tags.conf"), &ifaces).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse(text, Path::new("tags.conf"), &ifaces).expect_err("should fail").to_string()
}

#[test]
fn tag_names_are_interned_in_order() {
    let rs = ok(
        "t = \"WEB\"\npass in on em0 tag LAN\npass out on em1 tagged LAN\nblock out on em2 ! tagged $t\npass in on em2 tag \"WEB\" keep state\n",
    );
    assert_eq!(rs.tags, ["LAN", "WEB"]);
    assert_eq!((rs.rules[0].tag, rs.rules[0].tagged), (Some(1), None));
    assert_eq!((rs.rules[1].tag, rs.rules[1].tagged), (None, Some((false, 1))));
    assert_eq!(rs.rules[2].tagged, Some((true, 2)));
    assert_eq!(rs.rules[3].tag, Some(2));
    // A rule may test one tag and set another; tags on different interfaces or families
    // of the same direction are separate passes.
    let rs = ok(
        "pass in on em0 tag A\npass in on em1 tagged A tag B\npass in inet6 tag C\npass out inet tagged C\n",
    );
    assert_eq!(rs.rules[1].tagged, Some((false, 1)));
    assert_eq!(rs.rules[1].tag, Some(2));
}

#[test]
fn tag_errors_name_file_line_column() {
    let long = "x".repeat(64);
    let cases = [
        ("pass in tag\n".to_owned(), "tags.conf:1:12: expected a tag name, found end of line"),
        (format!("pass in tag {long}\n"), "tags.conf:1:13: bad tag name"),
        ("pass in tag \"\"\n".to_owned(), "tags.conf:1:13: bad tag name \"\""),
        (
            "pass out ! flags S/SA\n".to_owned(),
            "tags.conf:1:12: expected \"tagged\", found \"flags\"",
        ),
        (
            "pass in tag A\npass in proto tcp tagged A\n".to_owned(),
            "tags.conf:2:19: `tagged` after a rule that tags packets in the same pass (line 1) is not supported by linerate",
        ),
        (
            "pass on em0 tag A\npass out on { em1 em0 } tagged B\n".to_owned(),
            "tags.conf:2:25: `tagged` after a rule that tags packets in the same pass (line 1)",
        ),
        (
            "nat on em0 from any to any tag foo -> 192.0.2.1\n".to_owned(),
            "tags.conf:1:28: `tag` is not supported by linerate",
        ),
    ];
    for (text, want) in &cases {
        let got = err(text);
        assert!(got.starts_with(want), "{text:?}: got {got:?}, want {want:?}");
    }
    // The cap: the name that would be one too many is refused where it is written.
    let mut text: String = (0..MAX_TAGS).map(|i| format!("pass in tag t{i}\n")).collect();
    ok(&text);
    text += "pass out on em1 tagged t0\npass out tagged over\n";
    let got = err(&text);
    let line = MAX_TAGS + 2;
    assert!(got.starts_with(&format!("tags.conf:{line}:17: too many tags: \"over\"")), "{got}");
}

/// The verdict of `key` by the reference and by the classifier of each engine, checked equal.
fn verdict(rs: &RuleSet, key: &PacketKey) -> fw::reference::Verdict {
    let want = evaluate(rs, key);
    for engine in [Engine::Auto, Engine::Tree] {
        let cl = Classifier::build_with(rs, &BuildOptions { engine, ..BuildOptions::default() })
            .unwrap();
        assert_eq!(cl.classify(key), want, "{engine:?}: {key:?}");
    }
    want
}

const UDP: PacketKey = PacketKey {
    proto: proto::UDP,
    src: 0x0a00_0001,
    dst: 0x0a00_0002,
    src_port: 1000,
    dst_port: 53,
    ..PacketKey::ZERO
};
const TCP: PacketKey = PacketKey { proto: proto::TCP, tcp_flags: 0x02, ..UDP };

#[test]
fn a_matching_rule_tags_whether_or_not_it_decides() {
    let rs = ok("pass in tag A\npass in proto udp no state\n");
    let v = verdict(&rs, &UDP);
    assert_eq!((v.rule, v.tag), (Some(1), 1), "the deciding rule 1 sets no tag; rule 0 did");
    // The last matching tag wins; a rule that does not match tags nothing.
    let rs = ok("pass in tag A\npass in proto udp tag B\npass in proto icmp tag C\n");
    assert_eq!(verdict(&rs, &UDP).tag, 2);
    assert_eq!(verdict(&rs, &TCP).tag, 1);
    // A quick rule ends the walk: the rules after it tag nothing.
    let rs = ok("pass in tag A\npass in quick proto udp\npass in tag B\n");
    assert_eq!(verdict(&rs, &UDP).tag, 1);
    assert_eq!(verdict(&rs, &TCP).tag, 2);
    // A blocked packet is tagged too (and dropped); no tag at all is 0.
    let rs = ok("block in proto tcp tag A\npass in quick proto udp\n");
    assert_eq!(verdict(&rs, &TCP).tag, 1);
    assert_eq!(verdict(&rs, &UDP).tag, 0);
}

#[test]
fn tagged_and_not_tagged_test_the_tag_the_packet_brings() {
    let rs = ok("block out all\npass out on em1 tagged LAN\npass out on em2 ! tagged LAN\n");
    let out = |iface, tag| PacketKey { dir: Dir::Out, iface, tag, ..UDP };
    let lan = rs.tags.iter().position(|t| t == "LAN").unwrap() as u8 + 1;
    assert_eq!(verdict(&rs, &out(1, lan)).rule, Some(1));
    assert_eq!(verdict(&rs, &out(1, 0)).rule, Some(0));
    assert_eq!(verdict(&rs, &out(1, 7)).rule, Some(0), "a tag no rule tests is not LAN");
    assert_eq!(verdict(&rs, &out(2, 0)).rule, Some(2));
    assert_eq!(verdict(&rs, &out(2, 7)).rule, Some(2));
    assert_eq!(verdict(&rs, &out(2, lan)).rule, Some(0));
}

/// The verdict cache keys on the packet's tag: packets differing only there get their own
/// verdicts, and the tag the pass sets comes back from the cache.
#[test]
fn the_verdict_cache_keys_on_the_tag() {
    let rs = ok("block out all\npass out tagged LAN tag OUT\n");
    let cl = Classifier::build_with(
        &rs,
        &BuildOptions { engine: Engine::Tree, ..BuildOptions::default() },
    )
    .unwrap();
    assert!(cl.wants_cache());
    let mut cache = fw::classifier::VerdictCache::new(64, 1);
    let out = |tag| PacketKey { dir: Dir::Out, tag, ..UDP };
    for _ in 0..3 {
        for tag in [1, 0, 2, 1] {
            let want = evaluate(&rs, &out(tag));
            assert_eq!(cache.classify(&cl, &out(tag)), want, "tag {tag}");
            assert_eq!(want.tag, if tag == 1 { 2 } else { 0 });
        }
    }
    assert!(cache.counters().hits >= 9, "{:?}", cache.counters());
}
