//! HTTP tokens: `NAME~EXPIRY~SCOPE~MAC`.
//!
//! * NAME: the registry name the token speaks for; the registry is asked
//!   on every request, so `convoy fleet revoke NAME` ends its tokens.
//! * EXPIRY: Unix seconds after which the token is refused.
//! * SCOPE: `*` (whatever NAME may read) or one vehicle's name (an
//!   operator's token confined to that vehicle). Every token is read-only:
//!   the HTTP side has no write (`Scope::read_only`).
//! * MAC: a BLAKE3 keyed hash of the other fields under a key derived from
//!   the server's private key, so the server stores no token and a new
//!   server key invalidates every token.
//!
//! `~` is not in registry names (A-Z a-z 0-9 - _ .), so the fields split
//! without escapes, and every character is allowed in a cookie value.

/// What a genuine token grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    pub name: String,
    /// Unix seconds.
    pub expires: u64,
    /// `None`: all NAME may read; `Some(v)`: only vehicle `v`.
    pub vehicle: Option<String>,
}

/// Why a token is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token of this server (wrong form, wrong key, altered).
    Invalid,
    /// Genuine, but past its expiry.
    Expired,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Invalid => "invalid token",
            Refusal::Expired => "token expired",
        })
    }
}

/// Derives the MAC key from the server's static private key.
fn mac_key(server_private: &[u8; 32]) -> [u8; 32] {
    blake3::derive_key("convoy web token v2", server_private)
}

fn mac(server_private: &[u8; 32], name: &str, expires: u64, scope: &str) -> String {
    let mut h = blake3::Hasher::new_keyed(&mac_key(server_private));
    // Fields separated by a byte no field may hold.
    for field in [name, &expires.to_string(), scope] {
        h.update(field.as_bytes());
        h.update(&[0]);
    }
    h.finalize().as_bytes()[..20]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The longest field we accept, so a huge header costs no hashing.
const MAX_FIELD: usize = 64;

fn scope_field(vehicle: Option<&str>) -> &str {
    vehicle.unwrap_or("*")
}

/// A token for `claims`.
pub fn issue(server_private: &[u8; 32], claims: &Claims) -> String {
    let scope = scope_field(claims.vehicle.as_deref());
    format!(
        "{}~{}~{scope}~{}",
        claims.name,
        claims.expires,
        mac(server_private, &claims.name, claims.expires, scope)
    )
}

/// What a token grants at Unix time `now_s`, if it is genuine and alive.
pub fn verify(server_private: &[u8; 32], token: &str, now_s: u64) -> Result<Claims, Refusal> {
    let mut parts = token.split('~');
    let (Some(name), Some(exp), Some(scope), Some(given), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(Refusal::Invalid);
    };
    if [name, exp, scope, given]
        .iter()
        .any(|f| f.len() > MAX_FIELD)
        || name.is_empty()
    {
        return Err(Refusal::Invalid);
    }
    let expires: u64 = exp.parse().map_err(|_| Refusal::Invalid)?;
    let want = mac(server_private, name, expires, scope);
    // Constant time: compare every byte.
    let same = want.len() == given.len()
        && want
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return Err(Refusal::Invalid);
    }
    if now_s >= expires {
        return Err(Refusal::Expired);
    }
    Ok(Claims {
        name: name.to_owned(),
        expires,
        vehicle: (scope != "*").then(|| scope.to_owned()),
    })
}

/// Parses a lifetime such as `90s`, `30m`, `12h`, `30d` into seconds.
pub fn parse_lifetime(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?}: a lifetime is a number and s, m, h or d"))?;
    let mult = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit is s, m, h or d")),
    };
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{s:?}: a lifetime must be above zero and fit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(name: &str, vehicle: Option<&str>) -> Claims {
        Claims {
            name: name.into(),
            expires: 2_000,
            vehicle: vehicle.map(str::to_owned),
        }
    }

    #[test]
    fn tokens_verify_only_with_the_same_key_and_fields() {
        let k = [7u8; 32];
        let c = claims("truck.7", None);
        let t = issue(&k, &c);
        assert_eq!(verify(&k, &t, 1_000), Ok(c));
        assert_eq!(verify(&[8u8; 32], &t, 1_000), Err(Refusal::Invalid));
        let renamed = t.replace("truck.7", "truck.8");
        assert_eq!(verify(&k, &renamed, 1_000), Err(Refusal::Invalid));
        let longer = t.replace("~2000~", "~9000~");
        assert_eq!(verify(&k, &longer, 1_000), Err(Refusal::Invalid));
        let widened = issue(&k, &claims("ops", Some("v1"))).replace("~v1~", "~*~");
        assert_eq!(verify(&k, &widened, 1_000), Err(Refusal::Invalid));
        for bad in ["garbage", "", "~~~", "a~1~*~", "a~x~*~00", "a~1~*~00~extra"] {
            assert_eq!(verify(&k, bad, 1_000), Err(Refusal::Invalid), "{bad}");
        }
    }

    #[test]
    fn tokens_expire_and_keep_their_scope() {
        let k = [1u8; 32];
        let t = issue(&k, &claims("ops", Some("v1")));
        assert_eq!(
            verify(&k, &t, 1_999).unwrap().vehicle.as_deref(),
            Some("v1")
        );
        assert_eq!(verify(&k, &t, 2_000), Err(Refusal::Expired));
    }

    proptest::proptest! {
        /// Whatever a client sends as a token is refused or verified,
        /// never a panic; and a token survives only unchanged.
        #[test]
        fn any_input_is_answered_without_panic(s in ".{0,200}", now in 0u64..5_000) {
            let k = [3u8; 32];
            let _ = verify(&k, &s, now);
            let _ = parse_lifetime(&s);
            let t = issue(&k, &claims("ops", None));
            if s != t {
                proptest::prop_assert!(verify(&k, &s, 0).is_err());
            }
        }
    }

    #[test]
    fn lifetimes_parse() {
        assert_eq!(parse_lifetime("90s"), Ok(90));
        assert_eq!(parse_lifetime("30d"), Ok(30 * 86_400));
        assert_eq!(parse_lifetime("12h"), Ok(12 * 3_600));
        assert!(parse_lifetime("0s").is_err());
        assert!(parse_lifetime("3w").is_err());
        assert!(parse_lifetime("").is_err());
    }
}
