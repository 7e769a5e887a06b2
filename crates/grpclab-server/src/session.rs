//! The session service (`grpclab.session.v1.Sessions`, `scenarios/session/session.proto`),
//! served by every built-in server for flows: `Login` gives a token, `List` and `Get` take
//! it. The logic is here, apart from the transports: lab's gRPC layer and tonic's generated
//! service both call [`login`], [`list`] and [`get`].
//!
//! A token names its user and carries a keyed hash of the name (`tok.USER.HASH`), so any
//! server process checks it without a session table, and a token a client makes up or
//! alters is refused. Each answered call counts as a served call (`Stats`), and the
//! process counts the tokens it refused ([`refused_tokens`]) and the faulty lists it sent.

use std::sync::atomic::{AtomicU64, Ordering};

use grpclab_core::Code;

pub use crate::proto::pb_session::{
    GetRequest, Item, ListReply, ListRequest, LoginReply, LoginRequest,
};

/// The `:path`s of the service's methods.
pub const LOGIN_PATH: &str = "/grpclab.session.v1.Sessions/Login";
/// See [`LOGIN_PATH`].
pub const LIST_PATH: &str = "/grpclab.session.v1.Sessions/List";
/// See [`LOGIN_PATH`].
pub const GET_PATH: &str = "/grpclab.session.v1.Sessions/Get";

/// Items per user.
const ITEMS: u32 = 3;

/// The key of the tokens' hash: fixed, as the tokens only need to be checkable, not secret.
const TOKEN_KEY: u64 = 0x9e37_79b9_7f4a_7c15;

static LISTS: AtomicU64 = AtomicU64::new(0);
static LOGINS: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// A refusal: the status code and its message.
pub type Refusal = (Code, String);

/// Tokens refused so far by this process (List and Get without a valid token).
pub fn refused_tokens() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

fn token_hash(user: &str) -> u64 {
    // FNV-1a over the key and the name: cheap and stable across processes and builds.
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ TOKEN_KEY;
    for byte in user.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// `Login`: a token for a non-empty user name without '.'; with `unavailable_every` N > 0,
/// every Nth Login this process answers is refused with UNAVAILABLE (counted as a served
/// call: the server saw it), a fault a client may retry.
pub fn login(request: &LoginRequest) -> Result<LoginReply, Refusal> {
    let user = request.user.as_str();
    if user.is_empty() || user.contains('.') {
        return Err((
            Code::InvalidArgument,
            "user must be a non-empty name without '.'".to_owned(),
        ));
    }
    let number = LOGINS.fetch_add(1, Ordering::Relaxed) + 1;
    let every = u64::from(request.unavailable_every);
    if every > 0 && number.is_multiple_of(every) {
        crate::stats::count_call();
        return Err((
            Code::Unavailable,
            format!("login {number} refused: every {every}th login is (unavailable_every)"),
        ));
    }
    let hash = token_hash(user);
    crate::stats::count_call();
    Ok(LoginReply {
        token: format!("tok.{user}.{hash:016x}"),
        user_id: hash >> 16,
    })
}

/// The user a token was given to, if Login gave it.
fn user_of(token: &str) -> Result<&str, Refusal> {
    let valid = token
        .strip_prefix("tok.")
        .and_then(|rest| rest.rsplit_once('.'))
        .filter(|(user, hash)| {
            !user.is_empty() && u64::from_str_radix(hash, 16).ok() == Some(token_hash(user))
        })
        .map(|(user, _)| user);
    valid.ok_or_else(|| {
        REFUSED.fetch_add(1, Ordering::Relaxed);
        let shown: String = token.chars().take(40).collect();
        (
            Code::Unauthenticated,
            format!("token '{shown}' was not given by Login; log in first and send its token"),
        )
    })
}

fn item(user: &str, index: u32) -> Item {
    Item {
        sku: format!("sku-{user}-{index}"),
        price_cents: 100 * i64::from(index + 1),
        owner: user.to_owned(),
    }
}

/// `List`: the token's user's items; with `fault_every` N > 0, every Nth List this process
/// answers names a first item that is not the user's (sku `wrong-...`).
pub fn list(request: &ListRequest) -> Result<ListReply, Refusal> {
    let user = user_of(&request.token)?;
    let number = LISTS.fetch_add(1, Ordering::Relaxed) + 1;
    let mut items: Vec<Item> = (0..ITEMS).map(|index| item(user, index)).collect();
    if request.fault_every > 0 && number.is_multiple_of(u64::from(request.fault_every)) {
        items[0].sku = format!("wrong-{user}");
    }
    crate::stats::count_call();
    Ok(ListReply {
        count: items.len() as u32,
        items,
    })
}

/// `Get`: one of the token's user's items by sku.
pub fn get(request: &GetRequest) -> Result<Item, Refusal> {
    let user = user_of(&request.token)?;
    let found = (0..ITEMS)
        .map(|index| item(user, index))
        .find(|item| item.sku == request.sku);
    match found {
        Some(item) => {
            crate::stats::count_call();
            Ok(item)
        }
        None => Err((
            Code::NotFound,
            format!("no item '{}' for user '{user}'", request.sku),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_token_opens_list_and_get_and_nothing_else_does() {
        let reply = login(&LoginRequest {
            user: "ann".to_owned(),
            unavailable_every: 0,
        })
        .unwrap();
        assert!(reply.token.starts_with("tok.ann."), "{}", reply.token);
        let listed = list(&ListRequest {
            token: reply.token.clone(),
            fault_every: 0,
        })
        .unwrap();
        assert_eq!(listed.count, 3);
        assert_eq!(listed.items[0].sku, "sku-ann-0");
        let got = get(&GetRequest {
            token: reply.token.clone(),
            sku: "sku-ann-2".to_owned(),
        })
        .unwrap();
        assert_eq!((got.price_cents, got.owner.as_str()), (300, "ann"));
        // Another user's item, a made-up token, an altered one.
        let other = get(&GetRequest {
            token: reply.token.clone(),
            sku: "sku-bob-0".to_owned(),
        });
        assert_eq!(other.unwrap_err().0, Code::NotFound);
        let refused_before = refused_tokens();
        for token in [
            "tok.ann.0000000000000000".to_owned(),
            reply.token.replace("ann", "bob"),
            String::new(),
        ] {
            let refused = list(&ListRequest {
                token,
                fault_every: 0,
            });
            assert_eq!(refused.unwrap_err().0, Code::Unauthenticated);
        }
        assert!(refused_tokens() >= refused_before + 3);
        assert_eq!(
            login(&LoginRequest {
                user: "a.b".to_owned(),
                unavailable_every: 0,
            })
            .unwrap_err()
            .0,
            Code::InvalidArgument
        );
    }
}
