//! HTTP tokens: `NAME.MAC`, where MAC is a BLAKE3 keyed hash of the name
//! under a key derived from the server's private key. The server checks a
//! token by recomputing it, so it stores no token; a revoked name's token
//! stops working with the name (the registry is asked on every request),
//! and a new server key invalidates every token.

/// Derives the MAC key from the server's static private key.
fn mac_key(server_private: &[u8; 32]) -> [u8; 32] {
    blake3::derive_key("convoy web token v1", server_private)
}

fn mac(server_private: &[u8; 32], name: &str) -> String {
    let h = blake3::keyed_hash(&mac_key(server_private), name.as_bytes());
    h.as_bytes()[..20]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The token of `name`.
pub fn issue(server_private: &[u8; 32], name: &str) -> String {
    format!("{name}.{}", mac(server_private, name))
}

/// The name a token was issued to, if it is genuine.
pub fn verify(server_private: &[u8; 32], token: &str) -> Option<String> {
    let (name, given) = token.rsplit_once('.')?;
    let want = mac(server_private, name);
    // Constant time: compare every byte.
    let same = want.len() == given.len()
        && want
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    same.then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_with_the_same_key_and_name() {
        let k = [7u8; 32];
        let t = issue(&k, "truck.7");
        assert_eq!(verify(&k, &t).as_deref(), Some("truck.7"));
        assert_eq!(verify(&[8u8; 32], &t), None);
        assert_eq!(verify(&k, &t.replace("truck.7", "truck.8")), None);
        assert_eq!(verify(&k, "garbage"), None);
        assert_eq!(verify(&k, ""), None);
    }
}
