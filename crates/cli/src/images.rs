//! Images: pull, images, inspecti (rmi and imagefsinfo are one call each).

use crate::call::call_with;
use crate::fail::Fail;
use crate::output::{human, table};
use crate::spec::{Opt, Parsed};
use futures_util::StreamExt;
use podscope_api::image::{ImageFilter, ImageSummary, PullOptions};
use podscope_api::proxy::{system_connection, ImagesProxy};
use podscope_api::{from_dict, Client, Dict};
use std::io::{IsTerminal, Write};

/// pull's arguments: IMAGE and its credentials.
pub fn pull_args(p: &Parsed) -> Result<(String, PullOptions), Fail> {
    let [image] = p.operands() else {
        return Err(Fail("pull needs an IMAGE".into()));
    };
    let mut options = PullOptions::default();
    for g in p.flags() {
        let v = g.value().to_owned();
        match g.opt() {
            Opt::Creds => {
                let (u, pw) = v.split_once(':').unwrap_or((v.as_str(), ""));
                options.username = Some(u.to_owned());
                options.password = Some(pw.to_owned());
            }
            Opt::Auth => options.auth = Some(v),
            Opt::RegistryToken => options.registry_token = Some(v),
            _ => return Err(g.unhandled(p)),
        }
    }
    Ok((image.clone(), options))
}

pub async fn pull(
    flags: enumflags2::BitFlags<zbus::proxy::MethodFlags>,
    image: &str,
    options: &PullOptions,
) -> Result<(), Fail> {
    // A pull may take longer than any other call: its own connection.
    let conn = system_connection(std::time::Duration::from_secs(6 * 3600))
        .await
        .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let proxy = ImagesProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await?;
    let tty = std::io::stderr().is_terminal();
    let mut progress = if tty {
        Some(proxy.receive_pull_progress().await?)
    } else {
        None
    };
    let body = (image, options);
    let call = call_with::<_, Dict>(proxy.inner(), flags, "Pull", &body);
    tokio::pin!(call);
    let reply = loop {
        tokio::select! {
            r = &mut call => break r?,
            Some(sig) = async {
                match progress.as_mut() {
                    Some(p) => p.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Ok(a) = sig.args() {
                    if a.reference == image {
                        eprint!(
                            "\r{image}: {} of {}, {}/{} layers   ",
                            human(a.bytes_done),
                            human(a.bytes_total),
                            a.layers_done,
                            a.layers_total
                        );
                        let _ = std::io::stderr().flush();
                    }
                }
            }
        }
    };
    if tty {
        eprintln!();
    }
    let s: ImageSummary = from_dict(None, &reply).map_err(|e| Fail(format!("Pull reply: {e}")))?;
    println!("{}", s.id);
    Ok(())
}

/// images' arguments: -q and an IMAGE to match.
pub fn list_args(p: &Parsed) -> Result<(ImageFilter, bool), Fail> {
    let mut quiet = false;
    for g in p.flags() {
        match g.opt() {
            Opt::Quiet => quiet = true,
            _ => return Err(g.unhandled(p)),
        }
    }
    let filter = match p.operands() {
        [] => ImageFilter::default(),
        [image] => ImageFilter {
            image: Some(image.clone()),
        },
        _ => return Err(Fail("images takes at most one IMAGE".into())),
    };
    Ok((filter, quiet))
}

pub async fn list(m: &Client, filter: &ImageFilter, quiet: bool) -> Result<(), Fail> {
    let mut images = m.list_images(filter).await?;
    images.sort_by(|a, b| a.repo_tags.cmp(&b.repo_tags).then(a.id.cmp(&b.id)));
    if quiet {
        for i in images {
            println!("{}", i.id);
        }
        return Ok(());
    }
    let mut rows = vec![vec![
        "IMAGE".into(),
        "TAG".into(),
        "IMAGE ID".into(),
        "SIZE".into(),
    ]];
    for i in &images {
        let short =
            i.id.trim_start_matches("sha256:")
                .chars()
                .take(13)
                .collect::<String>();
        let names: Vec<(String, String)> = if i.repo_tags.is_empty() {
            i.repo_digests
                .iter()
                .map(|d| {
                    (
                        d.split('@').next().unwrap_or(d).to_owned(),
                        "<none>".to_owned(),
                    )
                })
                .take(1)
                .collect()
        } else {
            i.repo_tags
                .iter()
                .map(|t| match t.rsplit_once(':') {
                    Some((r, tag)) if !tag.contains('/') => (r.to_owned(), tag.to_owned()),
                    _ => (t.clone(), "<none>".to_owned()),
                })
                .collect()
        };
        for (repo, tag) in names {
            rows.push(vec![repo, tag, short.clone(), human(i.size)]);
        }
    }
    table(&rows);
    Ok(())
}

pub async fn inspect(m: &Client, image: &str) -> Result<(), Fail> {
    let (s, i) = m.image_status(image).await?;
    let mut doc = i.to_json();
    let summary = serde_json::json!({
        "id": s.id,
        "repoTags": s.repo_tags,
        "repoDigests": s.repo_digests,
        "size": s.size,
        "user": s.user,
    });
    if let (Some(d), serde_json::Value::Object(sm)) = (doc.as_object_mut(), summary) {
        d.extend(sm);
    }
    println!("{}", serde_json::to_string_pretty(&doc).expect("JSON"));
    Ok(())
}
