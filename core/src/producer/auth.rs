//! SASL on the producer's connections: the exchange after ApiVersions, re-authentication
//! (KIP-368) and the driver's SASL inputs. A child module of `producer`, so that the SASL
//! code lives apart from the rest of the connection handling.
//!
//! # The connection's life with SASL
//!
//! `Connecting` → `Negotiating` (ApiVersions) → `Authenticating` (SaslHandshake v1, then
//! SaslAuthenticate round trips; SCRAM and OAUTHBEARER ask the driver for a nonce or a token
//! with `Output::SaslInput` on the way) → `Ready`. Nothing else is written on a connection
//! before it is `Ready`, so a failed authentication never leaves a record in a log.
//!
//! # Re-authentication
//!
//! When the final SaslAuthenticate response (v1+) announces a session lifetime, the
//! connection re-authenticates once 85–95% of it has passed, counted from when this
//! exchange's SaslHandshake was sent (no later than the broker starts counting); the
//! fraction is spread over connections by their id instead of at random, since the core has no
//! randomness. Kafka closes a connection whose session has expired as soon as it receives
//! anything but a re-authentication, so the deadline is kept even for an idle connection.
//!
//! While re-authenticating the connection is `Reauthenticating`: no new request is written
//! on it (Produce, Metadata and InitProducerId go elsewhere or wait), but requests already
//! in flight are not disturbed. The SaslHandshake goes out right behind them: KIP-368 lets a
//! client start re-authenticating with requests outstanding, and the broker serves one
//! connection's requests in order, so their responses arrive first, in the same FIFO order the
//! core matches correlation ids in, and are handled as usual. Records are therefore neither
//! lost (in-flight responses are processed) nor duplicated (nothing is re-sent; a connection
//! lost meanwhile goes through the ordinary idempotent retry path). Once the exchange succeeds
//! the connection is `Ready` again with a new deadline.
//!
//! # Failures
//!
//! A refused mechanism, bad credentials, a token the driver cannot supply or a server that
//! fails SCRAM's mutual authentication, before any connection has completed its handshake,
//! is the configuration speaking: once every bootstrap server has refused (or failed to
//! connect), the producer fails with [`FatalError::Authentication`], nothing reconnects, and
//! every pending record fails at once with it (`NotPersisted`, as nothing was written on an
//! unauthenticated connection). Once a connection has completed its handshake, a refusal
//! (a re-authentication, a reconnect, a token provider's hiccup) is an error on that
//! connection only ([`crate::Diagnostic::HandshakeFailed`], `Producer::handshake_failed`):
//! it is closed, what was in flight on it goes through the ordinary idempotent retry path,
//! and it is opened again after the reconnect backoff.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{ConnState, Producer, RequestKind};
use crate::protocol::api_versions::ApiVersionsResponse;
use crate::protocol::sasl::{SaslAuthenticateRequest, SaslHandshakeRequest};
use crate::protocol::{api_key, decode_response, Message, VersionRange};
use crate::sasl::{code_name, Exchange, SaslInput, Step, UNSUPPORTED_SASL_MECHANISM};
use crate::types::{ConnId, Diagnostic, FatalError, Output};

/// kprod needs SaslHandshake v1: v0 would send the mechanism's tokens unframed.
const HANDSHAKE_VERSIONS: VersionRange = VersionRange::new(1, 1);

/// SASL state of one connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SaslConn {
    exchange: Option<Exchange>,
    handshake_version: i16,
    authenticate_version: i16,
    /// When the current exchange's SaslHandshake was sent.
    started: Instant,
    /// When to re-authenticate, if the broker announced a session lifetime.
    reauth_at: Option<Instant>,
    /// Until when the driver may take to answer an `Output::SaslInput`.
    input_deadline: Option<Instant>,
    /// Whether an exchange ever succeeded on this connection.
    authenticated: bool,
}

impl SaslConn {
    /// The session's end comes `by` sooner (the wall clock jumped past the monotonic one):
    /// re-authenticate that much earlier, at once if that is already past, but not within
    /// [`MIN_REAUTH_INTERVAL`] of the last exchange's start by this clock. A wall clock
    /// stepped (NTP) rather than a suspend leaves the broker's clock where it was, and it
    /// refuses a re-authentication begun less than a second after the last one
    /// (ILLEGAL_SASL_STATE, closing the connection: the review of the change).
    pub(super) fn move_reauthentication_earlier(&mut self, by: Duration, now: Instant) {
        if let Some(t) = self.reauth_at {
            let floor = (self.started.checked_add(MIN_REAUTH_INTERVAL)).map_or(now, |f| f.max(now));
            let moved = t.checked_sub(by).unwrap_or(now).max(floor);
            self.reauth_at = Some(moved.min(t));
        }
    }

    /// The connection's next SASL deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        match (self.input_deadline, self.reauth_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Kafka's shortest interval between the starts of two re-authentications of a connection
/// (1 s, `KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`), with 100 ms for the time our
/// start and the broker's differ by.
const MIN_REAUTH_INTERVAL: Duration = Duration::from_millis(1100);

/// When to re-authenticate a session of `lifetime` started at `started`: at 85–95% of it,
/// spread over connections by id.
/// `None` when the lifetime is so long the deadline would not fit an `Instant`: never.
fn reauth_deadline(started: Instant, lifetime: Duration, conn: ConnId) -> Option<Instant> {
    let permille = 850 + (conn.0.wrapping_mul(37) % 101) as u32;
    started.checked_add(lifetime.checked_mul(permille)? / 1000)
}

impl Producer {
    /// Answers an [`Output::SaslInput`]: the SCRAM nonce or the OAUTHBEARER token for `conn`.
    /// Ignored if `conn` is gone or asked for nothing.
    pub fn handle_sasl_input(&mut self, now: Instant, conn: ConnId, input: SaslInput) {
        self.advance(now);
        let Some(cfg) = self.cfg.sasl.clone() else {
            return;
        };
        let Some(s) = self.conns.get_mut(&conn).and_then(|c| c.sasl.as_mut()) else {
            return;
        };
        if s.input_deadline.take().is_none() {
            return;
        }
        let Some(ex) = s.exchange.as_mut() else {
            return;
        };
        let step = ex.input(&cfg, input);
        self.sasl_step(conn, step);
    }

    /// ApiVersions succeeded on a connection of a SASL producer: start authenticating.
    pub(super) fn start_sasl(
        &mut self,
        conn: ConnId,
        resp: &ApiVersionsResponse,
    ) -> Result<(), &'static str> {
        let versions = resp
            .range_of(api_key::SASL_HANDSHAKE)
            .and_then(|r| HANDSHAKE_VERSIONS.intersect(&r))
            .zip(
                resp.range_of(api_key::SASL_AUTHENTICATE)
                    .and_then(|r| SaslAuthenticateRequest::VERSIONS.intersect(&r)),
            );
        let Some((handshake, authenticate)) = versions else {
            self.sasl_failed(
                conn,
                "the broker supports neither SaslHandshake v1 nor SaslAuthenticate \
                 (is it older than Kafka 1.0?)"
                    .to_owned(),
            );
            return Ok(());
        };
        let now = self.now;
        let c = self.conns.get_mut(&conn).ok_or("unknown connection")?;
        c.state = ConnState::Authenticating;
        c.sasl = Some(SaslConn {
            exchange: None,
            handshake_version: handshake.max,
            authenticate_version: authenticate.max,
            started: now,
            reauth_at: None,
            input_deadline: None,
            authenticated: false,
        });
        self.send_sasl_handshake(conn);
        Ok(())
    }

    fn send_sasl_handshake(&mut self, conn: ConnId) {
        let Some(cfg) = &self.cfg.sasl else { return };
        let req = SaslHandshakeRequest {
            mechanism: cfg.mechanism.name().to_owned(),
        };
        let now = self.now;
        let Some(s) = self.conns.get_mut(&conn).and_then(|c| c.sasl.as_mut()) else {
            return;
        };
        s.started = now;
        s.exchange = None;
        s.reauth_at = None;
        let version = s.handshake_version;
        self.transmit(conn, &req, version, RequestKind::SaslHandshake);
    }

    /// Starts re-authenticating connections whose session nears its end, and gives up on
    /// connections whose driver did not answer an `Output::SaslInput` in time.
    pub(super) fn sasl_timers(&mut self) {
        if self.cfg.sasl.is_none() {
            return;
        }
        let now = self.now;
        let due: Vec<(ConnId, bool)> = self
            .conns
            .iter()
            .filter_map(|(id, c)| {
                let s = c.sasl.as_ref()?;
                if s.input_deadline.is_some_and(|d| d <= now) {
                    Some((*id, false))
                } else if c.state == ConnState::Ready && s.reauth_at.is_some_and(|d| d <= now) {
                    Some((*id, true))
                } else {
                    None
                }
            })
            .collect();
        for (conn, reauth) in due {
            if reauth {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.state = ConnState::Reauthenticating;
                }
                self.send_sasl_handshake(conn);
            } else {
                self.close_conn(conn, "SASL input not supplied in time");
            }
        }
    }

    pub(super) fn on_sasl_handshake(
        &mut self,
        conn: ConnId,
        frame: Bytes,
    ) -> Result<(), &'static str> {
        let Some(cfg) = self.cfg.sasl.clone() else {
            return Err("unexpected SaslHandshake response");
        };
        let version = self.sasl_conn(conn)?.handshake_version;
        let (_, resp) = decode_response::<SaslHandshakeRequest>(version, frame)
            .map_err(|_| "bad SaslHandshake response")?;
        let mechanism = cfg.mechanism.name();
        let enabled = resp.mechanisms.iter().any(|m| m == mechanism);
        // Success goes on to authenticate whatever the list says, as the Java client does: a
        // proxy or a Kafka-compatible broker may answer without listing its mechanisms (or
        // list only some), and the authentication itself then tells (review finding,
        // 2026-12-06: a success with an empty list was refused as "not enabled").
        if resp.error_code == UNSUPPORTED_SASL_MECHANISM {
            let listed = if resp.mechanisms.is_empty() {
                "none".to_owned()
            } else {
                resp.mechanisms.join(", ")
            };
            // A broker may refuse a mechanism it lists (Tansu without SASL configured answers
            // UNSUPPORTED_SASL_MECHANISM listing PLAIN): said as it is, not as "not enabled".
            let why = if enabled {
                format!(
                    "the broker refused {mechanism} (UNSUPPORTED_SASL_MECHANISM) though it lists \
                     it among its mechanisms ({listed}): SASL is probably not set up on that \
                     listener"
                )
            } else {
                format!("the broker's listener does not enable {mechanism} (it enables: {listed})")
            };
            self.sasl_failed(conn, why);
            return Ok(());
        }
        if resp.error_code != 0 {
            // Kafka answers a SaslHandshake on a listener without SASL (PLAINTEXT, SSL) so; a
            // re-authentication less than a second after the last draws it too.
            let hint = if resp.error_code == 34 {
                ": the broker's listener probably does not use SASL (check security.protocol \
                 against the listener's protocol)"
            } else {
                ""
            };
            self.sasl_failed(
                conn,
                format!("SaslHandshake: {}{hint}", code_name(resp.error_code)),
            );
            return Ok(());
        }
        let (exchange, step) = Exchange::start(&cfg);
        self.sasl_conn(conn)?.exchange = Some(exchange);
        self.sasl_step(conn, step);
        Ok(())
    }

    pub(super) fn on_sasl_authenticate(
        &mut self,
        conn: ConnId,
        frame: Bytes,
    ) -> Result<(), &'static str> {
        let Some(cfg) = self.cfg.sasl.clone() else {
            return Err("unexpected SaslAuthenticate response");
        };
        // The connection alone is borrowed: the exchange may use `scram_salted` beside it.
        let s = (self.conns.get_mut(&conn))
            .and_then(|c| c.sasl.as_mut())
            .ok_or("SASL response on a connection without SASL")?;
        let (_, resp) = decode_response::<SaslAuthenticateRequest>(s.authenticate_version, frame)
            .map_err(|_| "bad SaslAuthenticate response")?;
        let ex = s
            .exchange
            .as_mut()
            .ok_or("SaslAuthenticate before SaslHandshake")?;
        if resp.error_code != 0 {
            let mut reason = match resp.error_message.as_deref() {
                Some(m) if !m.is_empty() => format!("{m} ({})", code_name(resp.error_code)),
                _ => code_name(resp.error_code),
            };
            if let Some(d) = ex.failure_detail().filter(|d| !reason.contains(d)) {
                reason.push_str(&format!("; server said: {d}"));
            }
            self.sasl_failed(conn, reason);
            return Ok(());
        }
        match ex.server(&cfg, &resp.auth_bytes, &mut self.scram_salted) {
            Step::Done => {
                self.sasl_authenticated(conn, resp.session_lifetime_ms);
            }
            step => self.sasl_step(conn, step),
        }
        Ok(())
    }

    fn sasl_conn(&mut self, conn: ConnId) -> Result<&mut SaslConn, &'static str> {
        self.conns
            .get_mut(&conn)
            .and_then(|c| c.sasl.as_mut())
            .ok_or("SASL response on a connection without SASL")
    }

    fn sasl_step(&mut self, conn: ConnId, step: Step) {
        match step {
            Step::Send(auth_bytes) => {
                let Ok(s) = self.sasl_conn(conn) else { return };
                let version = s.authenticate_version;
                let req = SaslAuthenticateRequest { auth_bytes };
                self.transmit(conn, &req, version, RequestKind::SaslAuthenticate);
            }
            Step::Need(need) => {
                let deadline = self.now + self.cfg.request_timeout;
                let Ok(s) = self.sasl_conn(conn) else { return };
                s.input_deadline = Some(deadline);
                self.out.push_back(Output::SaslInput { conn, need });
            }
            // Only a server message completes an exchange.
            Step::Done => {
                self.sasl_failed(conn, "the exchange ended before the server's answer".into())
            }
            Step::Fail(reason) => self.sasl_failed(conn, reason),
        }
    }

    fn sasl_authenticated(&mut self, conn: ConnId, session_lifetime_ms: i64) {
        let Some(mechanism) = self.cfg.sasl.as_ref().map(|s| s.mechanism.name()) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(s) = c.sasl.as_mut() else { return };
        // A lifetime from the broker: however large, it must not overflow. Counted from the
        // start of the exchange (the broker's session starts later, when it completes it), but
        // never before the end of this drain: a session shorter than its own exchange (a
        // short `connections.max.reauth.ms` over a long round trip, or a hostile lifetime)
        // would otherwise be re-authenticated at once, for ever, with nothing else ever sent.
        // This way what waited for the exchange goes out first, and the next one starts at
        // the next drain.
        // Kafka refuses a re-authentication that begins less than a second after the one
        // before it (ILLEGAL_SASL_STATE, `KafkaChannel`'s minimum interval): a session
        // shorter than about 1.1 s (a `connections.max.reauth.ms` of 1000, or an OAUTHBEARER
        // token near its expiry capping the session) had every second re-authentication
        // refused and its connection closed. The next one waits for that second (and a
        // margin for the round trip) when the session lasts longer than that.
        let now = self.now;
        let started = s.started;
        s.reauth_at = (session_lifetime_ms > 0)
            .then(|| {
                let lifetime = Duration::from_millis(session_lifetime_ms as u64);
                let d = reauth_deadline(started, lifetime, conn)?;
                let floor = started.checked_add(MIN_REAUTH_INTERVAL);
                let d = match (floor, started.checked_add(lifetime)) {
                    (Some(f), Some(end)) if d < f && f < end => f,
                    _ => d,
                };
                Some(d.max(now + Duration::from_nanos(1)))
            })
            .flatten();
        let reauthentication = std::mem::replace(&mut s.authenticated, true);
        c.state = ConnState::Ready;
        // Ready again with its traffic from before the re-authentication: it may be idle
        // sooner than `idle_check` says.
        self.idle_check.0 = None;
        let (addr, target, versions) = (c.addr.clone(), c.target, c.versions);
        if !reauthentication {
            self.handshake_done(target);
            self.diag(Diagnostic::Connected {
                conn,
                addr,
                versions,
            });
        }
        self.diag(Diagnostic::Authenticated {
            conn,
            mechanism,
            reauthentication,
            session_lifetime_ms,
        });
    }

    /// SASL failed on `conn`: an error on that connection, or fatal before any connection
    /// completed its handshake ([`Producer::handshake_failed`]).
    fn sasl_failed(&mut self, conn: ConnId, reason: String) {
        let mechanism = self.cfg.sasl.as_ref().map_or("?", |s| s.mechanism.name());
        self.handshake_failed(conn, FatalError::Authentication { mechanism, reason });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session lifetime from the broker, however long, never overflows: too long to fit
    /// an `Instant` means no re-authentication.
    #[test]
    fn a_huge_session_lifetime_is_never_rather_than_a_panic() {
        let now = Instant::now();
        let lifetime = Duration::from_millis(i64::MAX as u64);
        let d = reauth_deadline(now, lifetime, ConnId(3));
        assert!(d.is_none_or(|d| d > now));
        assert_eq!(reauth_deadline(now, Duration::MAX, ConnId(0)), None);
        let hour = Duration::from_secs(3600);
        let d = reauth_deadline(now, hour, ConnId(0)).unwrap();
        assert!(d > now + hour * 8 / 10 && d < now + hour);
    }
}
