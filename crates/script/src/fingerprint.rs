//! The launcher's build fingerprint: what tells an engine from a launcher binary built
//! from other sources, before they exchange a spec that the two might read differently.
//!
//! The launcher can run as a binary of its own (`operon-sandbox-exec`, beside `operon`),
//! so an engine may meet a launcher left over from another build: a `cargo run` that
//! rebuilt `operon` alone, or an image assembled from two builds. The spec's JSON would
//! still parse, and a protection the older launcher does not know would be silently
//! skipped. The fingerprint is a hash of the sources of everything the launcher runs and
//! of the crate's version, so both sides compute the same one exactly when they were
//! built from the same code.

/// The crate's version and the sources of the launcher's side of the sandbox.
const SOURCES: [&str; 8] = [
    env!("CARGO_PKG_VERSION"),
    include_str!("launcher.rs"),
    include_str!("spec.rs"),
    include_str!("rules.rs"),
    include_str!("channel.rs"),
    include_str!("protections.rs"),
    include_str!("proc_view.rs"),
    include_str!("private_copy.rs"),
];

/// This build's fingerprint.
pub(crate) const FINGERPRINT: u64 = fnv1a(&SOURCES);

/// 64-bit FNV-1a over the parts, each followed by a zero byte so that moving text from
/// one file to the next changes the hash. Not a defence against a forger: whoever can
/// replace the launcher binary can replace `operon` too.
const fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut part = 0;
    while part < parts.len() {
        let bytes = parts[part].as_bytes();
        let mut i = 0;
        while i <= bytes.len() {
            let byte = if i < bytes.len() { bytes[i] } else { 0 };
            hash ^= byte as u64;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
            i += 1;
        }
        part += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_and_separates_its_parts() {
        // The published FNV-1a test vector for "a", then the zero byte (xor 0, multiply).
        let a = 0xaf63_dc4c_8601_ec8c_u64;
        assert_eq!(fnv1a(&["a"]), a.wrapping_mul(0x0100_0000_01b3));
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        assert_ne!(FINGERPRINT, fnv1a(&[env!("CARGO_PKG_VERSION")]));
    }
}
