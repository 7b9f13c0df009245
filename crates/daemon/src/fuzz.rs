//! Property-based fuzzing of everything that parses outside input: bus
//! options and filters (any nesting of variants), checkpoints, CNI
//! configs, results and errors, bandwidth and slice values, systemd's
//! escaped object-path labels, and for images: names, registries.conf,
//! manifests, indexes, configs, challenges, auth files and hostile layers
//! (which must stay inside their directory). No input may panic; what is
//! accepted must survive the round trip it is stored or sent by. (What a
//! CRI client sends is podscope-cri's to fuzz.)
//!
//! `cargo test --lib fuzz` runs each target FUZZ_CASES times (256 when
//! unset); `make check` runs a few minutes' worth, `make fuzz` longer.

use podscope_api::domain::{network, slice, Sandbox, SandboxConfig, SandboxId};
use podscope_api::{self, from_dict, to_dict, CreateOptions, PodMetadata};
use podscope_test_support::fuzz::*;
use proptest::prelude::*;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use zbus::zvariant::Value;

fn meta() -> PodMetadata {
    PodMetadata {
        name: "fuzz".into(),
        namespace: "default".into(),
        uid: "u".into(),
        attempt: 0,
    }
}

/// A valid sandbox as the store writes it.
fn sandbox() -> Sandbox {
    Sandbox::new(
        SandboxId::random(),
        SandboxConfig {
            name: "web-0".into(),
            namespace: "default".into(),
            uid: "u".into(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            ..Default::default()
        },
        "podscope.slice".into(),
        1,
    )
}

proptest! {
    #![proptest_config(config())]

    /// Create's options: decoded, validated and, when accepted, the same
    /// after the trip through a dictionary the clients make.
    #[test]
    fn create_options_decode_and_validate(d in dict_of(value())) {
        let borrowed: HashMap<&str, Value<'_>> =
            d.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        if let Ok(o) = from_dict::<CreateOptions>(None, &borrowed) {
            let again: CreateOptions = from_dict(None, &to_dict(&o).unwrap()).unwrap();
            prop_assert_eq!(&again, &o);
            let c = o.into_config(meta());
            if c.validate().is_ok() {
                let _ = slice::slice_for_cgroup_parent(&c.cgroup_parent, "podscope.slice");
                let _ = network::capability_args(
                    &c.port_mappings, &c.dns, &c.annotations, "/podscope.slice/x",
                );
                let _ = c.privileges(std::path::Path::new("/var/lib/kubelet/seccomp"));
            }
        }
    }

    /// List's filter, as the bus decodes it, matched against a sandbox.
    #[test]
    fn list_filter_decodes_and_matches(d in dict_of(value())) {
        let borrowed: HashMap<&str, Value<'_>> =
            d.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        if let Ok(f) = crate::bus::manager::list_filter(&borrowed) {
            let _ = f.matches(&sandbox());
        }
        let _ = from_dict::<podscope_api::Resources>(Some("resources"), &borrowed);
    }

    /// Arbitrary bytes are not a checkpoint.
    #[test]
    fn checkpoint_decode_takes_any_bytes(b in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = crate::state::checkpoint::decode::<podscope_api::domain::Sandbox>(&b);
    }

    /// A checkpoint whose body was changed and its digest recomputed (as a
    /// bug in an older podscope might write): decoded or refused, and what
    /// decodes encodes to itself.
    #[test]
    fn checkpoint_decode_takes_any_body(at in any::<prop::sample::Index>(),
                                        cut in 0usize..64,
                                        junk in prop::collection::vec(any::<u8>(), 0..16)) {
        let good = crate::state::checkpoint::encode(&sandbox());
        let nl = good.iter().position(|&b| b == b'\n').unwrap();
        let mut body = good[nl + 1..].to_vec();
        let i = at.index(body.len());
        let end = (i + cut).min(body.len());
        body.splice(i..end, junk);
        let mut bytes = crate::state::checkpoint::MAGIC.as_bytes().to_vec();
        use sha2::Digest;
        for b in sha2::Sha256::digest(&body) {
            bytes.extend_from_slice(format!("{b:02x}").as_bytes());
        }
        bytes.push(b'\n');
        bytes.extend_from_slice(&body);
        if let Ok(sb) = crate::state::checkpoint::decode::<podscope_api::domain::Sandbox>(&bytes) {
            prop_assert_eq!(crate::state::checkpoint::decode::<podscope_api::domain::Sandbox>(&crate::state::checkpoint::encode(&sb)).unwrap(), sb);
        }
    }

    /// Conflists of any shape (and any bytes): parsed or named errors;
    /// what parses is written back as JSON that parses the same.
    #[test]
    fn conflist_parse(j in json(), b in prop::collection::vec(any::<u8>(), 0..64)) {
        use crate::cni::config::NetworkConfigList;
        let path = std::path::Path::new("/fuzz/10-x.conflist");
        let _ = NetworkConfigList::parse(&b, path);
        if let Ok(list) = NetworkConfigList::parse(j.to_string().as_bytes(), path) {
            let again = NetworkConfigList::parse(list.to_json().to_string().as_bytes(), path);
            prop_assert_eq!(again.ok(), Some(list));
        }
    }

    /// What a plugin prints: a result, an error object or anything else.
    #[test]
    fn cni_result_parse(j in json(), b in prop::collection::vec(any::<u8>(), 0..64),
                        code in any::<u8>()) {
        use std::os::unix::process::ExitStatusExt;
        let printed = j.to_string();
        for out in [printed.as_bytes(), &b[..]] {
            let _ = crate::cni::exec::plugin_output("ADD", out);
            let status = std::process::ExitStatus::from_raw(i32::from(code) << 8);
            let _ = crate::cni::exec::plugin_error_message(&status, out, out);
        }
        let _ = crate::cni::result::pod_ips(&j);
        let _ = crate::cni::result::pod_interfaces(&j);
        let mut moved = j.clone();
        crate::cni::result::move_sandbox(&mut moved, "/proc/1/fd/3", "/run/netns/x");
    }

    /// Bandwidth quantities and annotations.
    #[test]
    fn bandwidth_parse(q in prop_oneof![
                           "[+-]?[0-9]{0,25}(\\.[0-9]{0,8})?([eE][+-]?[0-9]{1,3})?(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|m)?",
                           text()],
                       ingress in proptest::option::of(text())) {
        if let Ok(bits) = network::parse_bandwidth("ingress", &q) {
            prop_assert!(bits > 0);
        }
        let mut a = BTreeMap::new();
        a.insert("kubernetes.io/egress-bandwidth".to_owned(), q.clone());
        if let Some(i) = ingress {
            a.insert("kubernetes.io/ingress-bandwidth".to_owned(), i);
        }
        let _ = network::bandwidth(&a);
    }

    /// cgroup parents in either form: what is accepted is a valid slice
    /// name with a cgroup path under /.
    #[test]
    fn slice_parse(p in prop_oneof![
                       "(/?[a-z0-9_.-]{0,12}){0,5}",
                       "([a-z0-9_]{0,8}-){0,5}[a-z0-9_]{0,8}\\.slice",
                       text()]) {
        if let Ok(s) = slice::slice_for_cgroup_parent(&p, "podscope.slice") {
            prop_assert!(slice::validate_slice_name(&s).is_ok(), "{} from {:?}", s, p);
            prop_assert!(slice::slice_cgroup_path(&s).starts_with('/'));
        }
    }

    /// systemd's escaped object-path labels: any text unescapes or is
    /// refused, and every unit name comes back from its path.
    #[test]
    fn label_unescaping(s in ".{0,40}", unit in "[a-zA-Z0-9@._\\\\:-]{0,60}") {
        use crate::systemd::unit_path::*;
        let _ = unescape_label(&s);
        prop_assert_eq!(unescape_label(&escape_label(&s)), Some(s.clone()));
        prop_assert_eq!(unit_from_path(&unit_path(&unit)), Some(unit.clone()));
    }

}

// ---- images: names, registries.conf, registry answers, layers ----

fn image_json() -> impl Strategy<Value = Json> {
    let digest = prop_oneof![
        Just(format!("sha256:{}", "a".repeat(64))),
        Just(format!("sha512:{}", "b".repeat(128))),
        "sha256:[0-9a-f]{0,70}",
        ".{0,20}",
    ];
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        digest.prop_map(Json::from),
        prop::sample::select(vec![
            crate::image::manifest::OCI_INDEX,
            crate::image::manifest::OCI_MANIFEST,
            crate::image::manifest::DOCKER_LIST,
            crate::image::manifest::DOCKER_MANIFEST,
            "application/vnd.oci.image.layer.v1.tar+zstd",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
            "linux",
            "amd64",
            "arm64",
            "v8",
            "layers",
            "1002:1004",
            "www-data",
        ])
        .prop_map(Json::from),
        text().prop_map(Json::from),
    ];
    let keys = prop_oneof![
        4 => prop::sample::select(vec![
            "schemaVersion", "mediaType", "manifests", "layers", "config", "digest",
            "size", "platform", "architecture", "os", "variant", "rootfs", "type",
            "diff_ids", "User", "urls", "fsLayers",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ];
    leaf.prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::from),
            prop::collection::btree_map(keys.clone(), inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Image names: pieces that mean something to the grammar, joined.
fn image_name() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "busybox",
            "library",
            "docker.io",
            "index.docker.io",
            "localhost",
            "127.0.0.1:5000",
            "[::1]:5000",
            "gcr.io",
            "a.b",
            "x__y",
            "a-b",
            "A",
            "..",
            ".",
            "",
            "latest",
            "1.36",
            "sha256",
            "@",
            ":",
            "/",
            "//",
        ])
        .prop_map(str::to_owned),
        "[a-z0-9._:@/-]{0,12}",
        ".{0,8}",
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

/// A tar entry name from parts that try to climb, hide or collide.
fn entry_name() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec![
        "a",
        "b",
        "..",
        ".",
        "",
        "/",
        "etc",
        ".wh.a",
        ".wh..wh..opq",
        ".wh.",
        ".wh..",
        ".wh...",
        "link",
        "abs",
    ]);
    prop::collection::vec(part, 1..5).prop_map(|v| v.join("/"))
}

proptest! {
    #![proptest_config(config())]

    /// A name that parses is normalised once and for all: its printed form
    /// parses to itself.
    #[test]
    fn image_references(s in image_name()) {
        if let Ok(r) = podscope_api::reference::Reference::parse(&s) {
            let again = podscope_api::reference::Reference::parse(&r.to_string()).unwrap();
            prop_assert_eq!(&again, &r);
            prop_assert!(!r.domain.is_empty() && !r.path.is_empty());
            prop_assert!(r.tag.is_some() || r.digest.is_some());
        }
        let _ = podscope_api::reference::id_prefix(&s);
    }

    /// registries.conf: any text; what is accepted answers `sources` for
    /// any name without panicking, mirrors first and the registry last.
    #[test]
    fn registries_conf(t in prop_oneof![
        ".{0,200}",
        (prop::collection::vec((image_name(), image_name(), any::<bool>(), any::<bool>(),
            prop::collection::vec((image_name(), prop::sample::select(vec!["", "all", "digest-only", "tag-only", "x"])), 0..3)), 0..4),
         prop::collection::vec(image_name(), 0..3))
            .prop_map(|(regs, search)| {
                let mut s = format!("unqualified-search-registries = {:?}\n", search);
                for (prefix, location, insecure, blocked, mirrors) in regs {
                    s += &format!("[[registry]]\nprefix = {prefix:?}\nlocation = {location:?}\ninsecure = {insecure}\nblocked = {blocked}\n");
                    for (m, pull) in mirrors {
                        s += &format!("[[registry.mirror]]\nlocation = {m:?}\npull-from-mirror = {pull:?}\n");
                    }
                }
                s
            }),
    ], name in image_name()) {
        let mut r = crate::image::registries::Registries::default();
        if r.merge(&t).is_ok() {
            if let Ok(reference) = podscope_api::reference::Reference::parse(&name) {
                if let Ok(sources) = r.sources(&reference) {
                    prop_assert!(!sources.is_empty());
                    prop_assert!(!sources.last().unwrap().mirror);
                    prop_assert!(sources.iter().all(|s| !s.domain.is_empty() && !s.path.is_empty()));
                }
            }
        }
    }

    /// What a registry answers: manifests, indexes and configs, as JSON of
    /// their shape or any bytes. No panic; an index's choice is one of it.
    #[test]
    fn registry_documents(j in image_json(), b in prop::collection::vec(any::<u8>(), 0..64),
                          ct in prop::sample::select(vec!["", "application/json",
                              crate::image::manifest::OCI_INDEX, crate::image::manifest::DOCKER_MANIFEST])) {
        let bytes = serde_json::to_vec(&j).unwrap();
        for body in [&bytes, &b] {
            if let Ok(crate::image::manifest::Document::Index(idx)) =
                crate::image::manifest::parse_document(ct, body)
            {
                let host = podscope_api::domain::platform::host();
                if let Some(d) = crate::image::manifest::choose(&idx, &host) {
                    prop_assert!(idx.manifests.contains(d));
                }
            }
            if let Ok(c) = crate::image::manifest::parse_config(body) {
                let ids = crate::image::manifest::chain_ids(&c.rootfs.diff_ids);
                prop_assert_eq!(ids.len(), c.rootfs.diff_ids.len());
                let _ = crate::image::manifest::user_of(
                    c.config.and_then(|c| c.user).as_deref().unwrap_or(""));
            }
        }
    }

    /// Challenges and auth files: any text.
    #[test]
    fn registry_auth(h in prop_oneof![".{0,80}", "(Bearer|Basic|bearer) [a-z=\",. ]{0,60}"],
                     j in image_json(), repo in image_name()) {
        let _ = crate::image::auth::parse_challenge(&h);
        let file = serde_json::json!({"auths": {repo.clone(): {"auth": h.clone()}}}).to_string();
        let _ = crate::image::auth::lookup(&file, &repo);
        let _ = crate::image::auth::lookup(&j.to_string(), &repo);
    }

    /// A layer of hostile entries (climbing names, symlinks out, hardlinks
    /// to anything, whiteouts of anything): unpacked or refused, never a
    /// panic, and nothing appears beside the layer's directory.
    #[test]
    fn layers_stay_inside(entries in prop::collection::vec(
        (entry_name(), 0u8..6, prop_oneof![entry_name(), Just("/".to_owned()), Just("/etc".to_owned())]), 1..8),
        garbage in prop::collection::vec(any::<u8>(), 0..64)) {
        let outer = podscope_test_support::TempDir::new();
        let layer = outer.0.join("layer");
        std::fs::create_dir(&layer).unwrap();
        let mut t = Vec::new();
        for (name, kind, link) in &entries {
            let mut h = tar::Header::new_ustar();
            let old = h.as_old_mut();
            let n = name.as_bytes();
            old.name[..n.len().min(99)].copy_from_slice(&n[..n.len().min(99)]);
            let l = link.as_bytes();
            old.linkname[..l.len().min(99)].copy_from_slice(&l[..l.len().min(99)]);
            h.set_entry_type(match kind {
                0 => tar::EntryType::Regular,
                1 => tar::EntryType::Directory,
                2 => tar::EntryType::Symlink,
                3 => tar::EntryType::Link,
                4 => tar::EntryType::Fifo,
                _ => tar::EntryType::Regular,
            });
            h.set_size(if *kind == 0 { 3 } else { 0 });
            h.set_mode(0o755);
            h.set_cksum();
            t.extend_from_slice(h.as_bytes());
            if *kind == 0 {
                t.extend_from_slice(b"abc");
                t.extend(std::iter::repeat_n(0u8, 509));
            }
        }
        t.extend_from_slice(&garbage);
        t.extend(std::iter::repeat_n(0u8, 1024));
        let _ = crate::image::unpack::unpack(t.as_slice(), &crate::image::manifest::Compression::None, &layer, &crate::image::unpack::Limits::default());
        let beside: Vec<_> = std::fs::read_dir(&outer.0).unwrap().flatten().map(|e| e.file_name()).collect();
        prop_assert_eq!(beside, vec![std::ffi::OsString::from("layer")]);
        // Where an escape through "/" or "/etc" would land.
        for p in ["/a", "/b", "/link", "/abs", "/etc/a", "/etc/b", "/etc/link", "/etc/abs"] {
            prop_assert!(std::fs::symlink_metadata(p).is_err(), "{} appeared", p);
        }
    }
}

/// A reader that hands out its bytes in the given chunk sizes, cycling.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    n: usize,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = self.sizes[self.n % self.sizes.len()].max(1);
        self.n += 1;
        let k = want.min(buf.len()).min(self.data.len());
        buf[..k].copy_from_slice(&self.data[..k]);
        self.data = &self.data[k..];
        Ok(k)
    }
}

proptest! {
    // Each case writes a layer's files: a tenth of the cases (3000 in
    // make check, ~11 s).
    #![proptest_config(ProptestConfig { cases: (config().cases / 10).max(32), ..config() })]

    /// Layers any tool writes (GNU long names and links, PAX records, files
    /// of any size), read in chunks of any size: the header guard follows
    /// the tar reader's framing and never refuses one within its limits,
    /// and every file comes out whole.
    #[test]
    fn well_formed_layers_pass_the_header_guard(
        files in prop::collection::vec(("[a-z]{1,8}(/[a-z]{1,40}){0,8}", 0usize..1500, any::<bool>()), 1..6),
        sizes in prop::collection::vec(1usize..2000, 1..8),
        pax in any::<bool>()) {
        let dir = podscope_test_support::TempDir::new();
        let mut t = Vec::new();
        let mut b = tar::Builder::new(&mut t);
        let mut seen = std::collections::HashSet::new();
        let mut want = Vec::new();
        for (i, (name, len, with_pax)) in files.iter().enumerate() {
            // One name per file, and none the directory of another.
            let name = format!("f{i}/{name}");
            if !seen.insert(name.clone()) {
                continue;
            }
            if pax && *with_pax {
                b.append_pax_extensions([("comment", name.as_bytes())]).unwrap();
            }
            let data: Vec<u8> = (0..*len).map(|k| (k % 251) as u8).collect();
            let mut h = tar::Header::new_gnu();
            h.set_size(*len as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, &name, data.as_slice()).unwrap();
            want.push((name, data));
        }
        b.into_inner().unwrap();
        let input = Chunked { data: &t, sizes, n: 0 };
        let r = crate::image::unpack::unpack(input, &crate::image::manifest::Compression::None, &dir.0, &crate::image::unpack::Limits::default());
        prop_assert!(r.is_ok(), "{:?}", r.err().map(|e| e.to_string()));
        for (name, data) in want {
            prop_assert_eq!(std::fs::read(dir.0.join(&name)).unwrap(), data);
        }
    }
}
