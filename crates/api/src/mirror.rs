//! `From` both ways between a wire dictionary and the domain type it
//! carries, each field named once. The fields the two share by name move
//! as they are; those of one side only are listed with that side and
//! built, for the other, from the tokens given. Each side is destructured
//! whole, so a field added to either and not listed here does not compile.
//!
//! ```ignore
//! mirror!(Dns, domain::DnsConfig, [servers, searches, options]);
//! mirror!(Security, dc::SecurityContext, [privileged, no_new_privs],
//!     wire [seccomp, seccomp_localhost_ref] => {
//!         seccomp: Profile { kind: seccomp, localhost_ref: seccomp_localhost_ref },
//!     },
//!     domain [seccomp] => {
//!         seccomp: seccomp.kind,
//!         seccomp_localhost_ref: seccomp.localhost_ref,
//!     });
//! ```

macro_rules! mirror {
    ($wire:path, $domain:path, [$($same:ident),* $(,)?]) => {
        mirror!($wire, $domain, [$($same),*], wire [] => {}, domain [] => {});
    };
    ($wire:path, $domain:path, [$($same:ident),* $(,)?],
     wire [$($wire_only:ident),* $(,)?] => { $($to_domain:tt)* },
     domain [$($domain_only:ident),* $(,)?] => { $($to_wire:tt)* }) => {
        impl From<$wire> for $domain {
            fn from(v: $wire) -> Self {
                let $wire { $($same,)* $($wire_only,)* } = v;
                $domain { $($same,)* $($to_domain)* }
            }
        }
        impl From<$domain> for $wire {
            fn from(v: $domain) -> Self {
                let $domain { $($same,)* $($domain_only,)* } = v;
                $wire { $($same,)* $($to_wire)* }
            }
        }
    };
}

pub(crate) use mirror;
