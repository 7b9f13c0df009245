//! The caller's gRPC deadline, kept by the frontend itself.
//!
//! A client's deadline arrives as the `grpc-timeout` header. tonic's server
//! reads it in a layer outside any of ours and, when it fires first,
//! answers CANCELLED "Timeout expired"; the gRPC spec names
//! DEADLINE_EXCEEDED for a deadline that expired, whoever notices it, and
//! critest 1.36 asks for exactly that. So `authority::Rewriter`, which
//! already re-encodes every request's header block, hands the header over
//! under `DEADLINE_HEADER` (a client's own header of that name is dropped),
//! and `Deadlines` here, the innermost layer, keeps the deadline:
//!
//! - a timeout grpc-go would refuse as malformed is INTERNAL "malformed
//!   grpc-timeout", as grpc-go's server answers it (`parse`);
//! - a timeout of zero is a deadline already past: DEADLINE_EXCEEDED before
//!   the call is looked at, nothing done;
//! - otherwise the call runs with the deadline in a task-local (`current`),
//!   so that each wait on podscoped ends with it (`daemon::Daemon::call`),
//!   and is answered DEADLINE_EXCEEDED when it passes.
//!
//! A call that changes something in several steps, or whose one step is
//! long (RunPodSandbox, CreateContainer, the stops and removes, PullImage),
//! runs in a task of its own (`runtime::detached`), which does not inherit
//! the task-local: cutting the caller's wait short never cuts the work
//! short, so the daemon ends it whole, and kubelet's retry joins it. The
//! others are one call to podscoped each, sent whole or not at all.
//!
//! For a server-streaming call (GetContainerEvents) the deadline holds
//! until its stream begins, as tonic's did.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Status;

/// The name `grpc-timeout` travels under from the header rewrite to
/// `Deadlines` (never one tonic or a client gives meaning to).
pub const DEADLINE_HEADER: &str = "podscope-grpc-timeout";
/// gRPC's own header name (PROTOCOL-HTTP2.md, Requests: Timeout).
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

tokio::task_local! {
    static DEADLINE: Instant;
}

/// The deadline of the CRI call this task serves, if its client set one.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// A `grpc-timeout` value grpc-go's server refuses, with its reason in
/// grpc-go's words (internal/transport/http_util.go, decodeTimeout).
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A `grpc-timeout` value as grpc-go's server reads it (decodeTimeout in
/// internal/transport/http_util.go): two to nine characters, one to eight
/// decimal digits (leading zeros allowed, no sign) and a unit of `H M S m u
/// n`. Anything else is malformed, and grpc-go answers INTERNAL
/// "malformed grpc-timeout" without running the handler. (grpc-go clamps
/// hours past what its duration holds; here a deadline past what an
/// `Instant` holds is no deadline.)
pub fn parse(value: &[u8]) -> Result<Duration, Malformed> {
    // Quoted in the answer and the journal: a long one only in part.
    let shown = String::from_utf8_lossy(&value[..value.len().min(32)]);
    if value.len() < 2 {
        return Err(Malformed(format!("timeout string is too short: {shown:?}")));
    }
    if value.len() > 9 {
        return Err(Malformed(format!("timeout string is too long: {shown:?}")));
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let per_unit = match unit[0] {
        b'H' => Duration::from_secs(3600),
        b'M' => Duration::from_secs(60),
        b'S' => Duration::from_secs(1),
        b'm' => Duration::from_millis(1),
        b'u' => Duration::from_micros(1),
        b'n' => Duration::from_nanos(1),
        _ => {
            return Err(Malformed(format!(
                "timeout unit is not recognized: {shown:?}"
            )))
        }
    };
    // strconv.ParseUint: digits only, no sign.
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(Malformed(format!("invalid syntax: {shown:?}")));
    }
    // Eight digits at most: the number fits a u32, and the product a
    // Duration (99999999 hours is far below its bound).
    let n: u32 = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Malformed(format!("invalid syntax: {shown:?}")))?;
    Ok(per_unit * n)
}

/// What `Deadlines` found in a request's headers.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// No timeout: the call runs with no deadline but the frontend's own.
    None,
    Within(Duration),
    Malformed(Malformed),
}

/// The deadline the header rewrite handed over. Of several, as grpc-go's
/// server reads them: any malformed one makes the call malformed, else the
/// last counts.
pub fn asked(headers: &http::HeaderMap) -> Asked {
    let mut asked = Asked::None;
    for v in headers.get_all(DEADLINE_HEADER) {
        match parse(v.as_bytes()) {
            Ok(d) => asked = Asked::Within(d),
            Err(e) => return Asked::Malformed(e),
        }
    }
    asked
}

/// Run `call` with `deadline` as the current call's (`current`).
pub async fn within<F: Future>(deadline: Instant, call: F) -> F::Output {
    DEADLINE.scope(deadline, call).await
}

/// The status for a call whose deadline passed (`timeout` as the client
/// gave it).
pub fn exceeded(timeout: Duration, during: &str) -> Status {
    Status::deadline_exceeded(format!(
        "the caller's deadline ({} after the call arrived) passed {during}",
        shown(timeout)
    ))
}

fn shown(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.3} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_micros() as f64 / 1000.0)
    }
}

/// The tower layer (`tonic::transport::Server::layer`).
#[derive(Clone, Copy, Default)]
pub struct Layer;

impl<S> tower::Layer<S> for Layer {
    type Service = Deadlines<S>;
    fn layer(&self, inner: S) -> Deadlines<S> {
        Deadlines { inner }
    }
}

/// Every CRI call with its caller's deadline kept (see the module's doc).
#[derive(Clone)]
pub struct Deadlines<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqB, ResB> tower::Service<http::Request<ReqB>> for Deadlines<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = http::Response<ResB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqB>) -> Self::Future {
        let arrived = Instant::now();
        let asked = asked(req.headers());
        req.headers_mut().remove(DEADLINE_HEADER);
        // The method's name, as the services log it (`cri_method`).
        let method = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        match asked {
            Asked::None => Box::pin(self.inner.call(req)),
            Asked::Malformed(e) => {
                tracing::warn!(cri_method = %method, "CRI {method}: malformed grpc-timeout: {e}");
                // grpc-go's answer: INTERNAL with HTTP status 400.
                let mut res = Status::internal(format!("malformed grpc-timeout: {e}")).into_http();
                *res.status_mut() = http::StatusCode::BAD_REQUEST;
                Box::pin(std::future::ready(Ok(res)))
            }
            Asked::Within(timeout) => {
                // A timeout past what an Instant holds is no deadline.
                let Some(deadline) = arrived.checked_add(timeout) else {
                    return Box::pin(self.inner.call(req));
                };
                // Zero, or so short it passed already: nothing is begun.
                if deadline <= Instant::now() {
                    return Box::pin(std::future::ready(Ok(exceeded(
                        timeout,
                        "before the call began: nothing was done",
                    )
                    .into_http())));
                }
                let call = within(deadline, self.inner.call(req));
                Box::pin(async move {
                    // The deadline first: an answer ready only once it has
                    // passed is DEADLINE_EXCEEDED too (the spec allows it
                    // "even if the operation has completed successfully"),
                    // and tokio's timer, a millisecond coarse, may wake late,
                    // so the clock is read as well. (A pull of an image in
                    // the store takes podscoped a millisecond: critest's 1 ms
                    // pull was answered OK past its deadline.)
                    let answer = tokio::select! {
                        biased;
                        _ = tokio::time::sleep_until(deadline) => None,
                        r = call => (Instant::now() < deadline).then_some(r),
                    };
                    answer.unwrap_or_else(|| {
                        tracing::warn!(
                            cri_method = %method,
                            code = "DeadlineExceeded",
                            "CRI {method}: the caller's deadline ({}) passed",
                            shown(timeout)
                        );
                        Ok(exceeded(timeout, "before the call was answered").into_http())
                    })
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tonic::Code;
    use tower::{Service, ServiceExt};

    #[test]
    fn timeouts_parse_as_grpc_go_reads_them() {
        for (v, d) in [
            ("1H", Duration::from_secs(3600)),
            ("2M", Duration::from_secs(120)),
            ("30S", Duration::from_secs(30)),
            ("250m", Duration::from_millis(250)),
            ("999987u", Duration::from_micros(999_987)),
            ("5n", Duration::from_nanos(5)),
            ("0S", Duration::ZERO),
            ("00000000S", Duration::ZERO),
            ("12345678m", Duration::from_millis(12_345_678)),
            ("99999999H", Duration::from_secs(99_999_999 * 3600)),
        ] {
            assert_eq!(parse(v.as_bytes()), Ok(d), "{v}");
        }
    }

    #[test]
    fn malformed_timeouts_are_named() {
        let long = "9".repeat(4000);
        for (v, why) in [
            ("", "too short"),
            ("S", "too short"),
            ("1", "too short"),
            ("123456789S", "too long"),
            (
                long.as_str(),
                "too long: \"99999999999999999999999999999999\"",
            ),
            ("000000000S", "too long"),
            ("10x", "unit is not recognized"),
            ("10s", "unit is not recognized"),
            ("-1S", "invalid syntax"),
            ("+1S", "invalid syntax"),
            ("1 S", "invalid syntax"),
            ("1.5S", "invalid syntax"),
            ("\u{e9}S", "invalid syntax"),
        ] {
            let e = parse(v.as_bytes()).unwrap_err();
            assert!(e.0.contains(why), "{v:?}: {e}");
        }
    }

    /// A stand-in for tonic's router: answers after `delay`, saying whether
    /// it saw a deadline and the handed-over header.
    #[derive(Clone)]
    struct Slow {
        delay: Duration,
        calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Service<http::Request<()>> for Slow {
        type Response = http::Response<String>;
        type Error = Infallible;
        type Future = BoxFuture<Result<Self::Response, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: http::Request<()>) -> Self::Future {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let delay = self.delay;
            let header_left = req.headers().contains_key(DEADLINE_HEADER);
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(http::Response::new(format!(
                    "deadline={} header={header_left}",
                    current().is_some()
                )))
            })
        }
    }

    async fn answer(delay_ms: u64, timeout: Option<&str>) -> (Option<Code>, String, usize) {
        let calls = std::sync::Arc::default();
        let mut svc = tower::Layer::layer(
            &Layer,
            Slow {
                delay: Duration::from_millis(delay_ms),
                calls: std::sync::Arc::clone(&calls),
            },
        );
        let mut req = http::Request::new(());
        if let Some(t) = timeout {
            req.headers_mut()
                .insert(DEADLINE_HEADER, http::HeaderValue::from_str(t).unwrap());
        }
        let res = svc.ready().await.unwrap().call(req).await.unwrap();
        let code = Status::from_header_map(res.headers()).map(|s| s.code());
        (
            code,
            res.into_body(),
            calls.load(std::sync::atomic::Ordering::SeqCst),
        )
    }

    /// podscope-cri(8)'s table of the codes for a call cut short names
    /// each code this module and `errors` give.
    #[test]
    fn the_man_page_tables_the_codes_of_a_call_cut_short() {
        let man = include_str!("../../../man/podscope-cri.8");
        let from = man.find(".SS Calls cut short").expect("the section");
        let table = &man[from..];
        let table = &table[..table.find(".TE").expect("its table")];
        for code in ["DEADLINE_EXCEEDED", "INTERNAL", "UNAVAILABLE", "CANCELLED"] {
            assert!(table.contains(&format!("\t{code}\t")), "{code}");
        }
        assert!(table.contains("malformed grpc\\-timeout"));
        assert!(table.contains("\\-\\-call\\-timeout"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_passed_deadline_is_deadline_exceeded_and_the_call_sees_its_deadline() {
        let (code, _, calls) = answer(5_000, Some("1S")).await;
        assert_eq!((code, calls), (Some(Code::DeadlineExceeded), 1));
        let (code, body, _) = answer(10, Some("1S")).await;
        assert_eq!(code, None);
        assert_eq!(body, "deadline=true header=false");
        // Ready at the very moment the deadline passes: too late.
        let (code, _, _) = answer(1_000, Some("1S")).await;
        assert_eq!(code, Some(Code::DeadlineExceeded));
        let (code, _, _) = answer(999, Some("1S")).await;
        assert_eq!(code, None);
        let (code, body, _) = answer(10, None).await;
        assert_eq!(code, None);
        assert_eq!(body, "deadline=false header=false");
    }

    #[test]
    fn of_several_timeouts_a_malformed_one_wins_else_the_last() {
        let mut h = http::HeaderMap::new();
        assert_eq!(asked(&h), Asked::None);
        for v in ["5S", "2S"] {
            h.append(DEADLINE_HEADER, http::HeaderValue::from_static(v));
        }
        assert_eq!(asked(&h), Asked::Within(Duration::from_secs(2)));
        h.append(DEADLINE_HEADER, http::HeaderValue::from_static("x"));
        h.append(DEADLINE_HEADER, http::HeaderValue::from_static("1S"));
        assert!(matches!(asked(&h), Asked::Malformed(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_is_a_deadline_already_past_and_nothing_is_called() {
        for t in ["0S", "0n", "0H"] {
            let (code, _, calls) = answer(0, Some(t)).await;
            assert_eq!((code, calls), (Some(Code::DeadlineExceeded), 0), "{t}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_malformed_timeout_is_internal_as_grpc_go_answers_it() {
        for t in ["x", "10x", "-1S", "123456789S"] {
            let (code, _, calls) = answer(0, Some(t)).await;
            assert_eq!((code, calls), (Some(Code::Internal), 0), "{t}");
        }
    }
}
