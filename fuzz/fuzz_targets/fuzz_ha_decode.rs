#![no_main]
//! The state sync decoder (`ha::decode`) on arbitrary bytes, with and without a key: Ok or an
//! error, never a panic. What decodes without a key encodes again, plain and tagged, to
//! datagrams that decode to the same messages.
use std::sync::LazyLock;

use ha::{Key, MAX_DATAGRAM_LEN, decode, encode};
use libfuzzer_sys::fuzz_target;

static KEY: LazyLock<Key> =
    LazyLock::new(|| Key::new(b"fuzz_ha_decode's key, 32 bytes!!").expect("a long key"));

fuzz_target!(|data: &[u8]| {
    let _ = decode(data, Some(&KEY));
    let Ok(d) = decode(data, None) else { return };
    for key in [None, Some(&*KEY)] {
        let again = encode(&d.messages, &d.header, key, MAX_DATAGRAM_LEN).expect("decoded encodes");
        // A tag may not fit beside the largest datagrams: those take the rest in another.
        if again.taken == d.messages.len() {
            let back = decode(&again.bytes, key).expect("encoded decodes");
            assert_eq!(back.messages, d.messages);
        }
    }
});
