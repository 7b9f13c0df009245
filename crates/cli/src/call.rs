//! Calls to podscoped: a mutating one lets polkit ask for a password
//! unless --no-ask-password (`Mutate`), any other with the flags given.

use crate::fail::Fail;
use enumflags2::BitFlags;
use podscope_api::Client;
use zbus::proxy::MethodFlags;

/// The mutating calls, with ALLOW_INTERACTIVE_AUTHORIZATION unless
/// --no-ask-password (as systemctl and machinectl do): polkit may then have
/// an authentication agent ask for a password instead of refusing.
pub(crate) struct Mutate<'a> {
    pub(crate) m: &'a Client,
    pub(crate) flags: BitFlags<MethodFlags>,
}

impl Mutate<'_> {
    pub(crate) async fn call<B, R>(&self, method: &str, body: &B) -> Result<R, Fail>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        call_with(self.m.proxy().inner(), self.flags, method, body).await
    }
}

pub(crate) async fn call_with<B, R>(
    proxy: &zbus::Proxy<'_>,
    flags: BitFlags<MethodFlags>,
    method: &str,
    body: &B,
) -> Result<R, Fail>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
    R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
{
    proxy
        .call_with_flags(method, flags, body)
        .await?
        .ok_or_else(|| Fail(format!("{method}: no reply")))
}
