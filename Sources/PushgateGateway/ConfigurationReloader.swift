import APNsHTTP2
import CoreMetrics
import FCMTransport
public import Foundation
import Logging
public import PushgateConfig
import PushgateCore
import PushgateHTTP
import Synchronization
import WebPushTransport

extension Gateway {
    /// How a reload (SIGHUP) reads the configuration again: the same flags, environment and file as at
    /// start-up (`pushgate` re-runs its loader). Set on ``Configuration/reloadSource``; nil: a reload
    /// re-reads only the HTTP API's certificate (and whatever the caller registered).
    public struct ReloadSource: Sendable {
        /// The configuration as it reads now, checked (``ConfigurationLoader/load()`` and the flags without a
        /// key); a problem fails the reload.
        public var read: @Sendable () async throws(ConfigurationProblem) -> GatewayConfiguration
        /// Where `.p12` passphrases and PostgreSQL's password are looked up, as at start-up.
        public var environment: [String: String]

        public init(
            environment: [String: String] = ProcessInfo.processInfo.environment,
            read: @escaping @Sendable () async throws(ConfigurationProblem) -> GatewayConfiguration
        ) {
            self.read = read
            self.environment = environment
        }
    }
}

/// Applies a reload of the whole configuration, all or nothing: the configuration is read again and every
/// file it names is read and checked (``GatewayConfiguration/loadCredentials(environment:clock:)``, the
/// start-up checks); only when all of it passes are the changes applied: the API keys, each HTTP/2 app's
/// APNs credentials, each app's FCM service account, each app's VAPID key and subject and the HTTP API's
/// certificate. A credential that did
/// not change is left alone (its connections stay up). What a reload cannot apply
/// (``GatewayConfiguration/changesNeedingRestart(to:)``) is logged as needing a restart and ignored.
///
/// New credentials go to new connections; the connections open before the reload take nothing new,
/// finish what they hold and close (``APNsClient/renew(_:)``, ``FCMClient/renew(_:)``), so nothing in flight
/// is lost or sent twice.
final class ConfigurationReloader: Sendable {
    /// The clients of one app, as the gateway built them.
    struct App: Sendable {
        var name: String
        var topic: Topic
        /// nil for a legacy app (its certificate needs a restart).
        var apns: APNsClient?
        var fcm: FCMClient?
        var webPush: WebPushClient?
    }

    private let source: Gateway.ReloadSource
    /// What the gateway started with: restart-only changes are judged against it (so they are logged on
    /// every reload until the restart).
    private let started: GatewayConfiguration
    private let apps: [App]
    private let api: HTTPAPI?
    private let httpTLS: ReloadableTLSContext?
    private let apiKeys: Mutex<[APIKey]>
    private let clock: any WallClock
    private let succeeded: CoreMetrics.Counter
    private let failed: CoreMetrics.Counter

    init(
        source: Gateway.ReloadSource,
        started: GatewayConfiguration,
        apps: [App],
        api: HTTPAPI?,
        clock: any WallClock,
        metricsFactory: any MetricsFactory
    ) {
        self.source = source
        self.started = started
        self.apps = apps
        self.api = api
        self.httpTLS = api?.configuration.tls
        self.apiKeys = Mutex(api?.configuration.apiKeys ?? [])
        self.clock = clock
        succeeded = CoreMetrics.Counter(
            label: "pushgate_reloads_total",
            dimensions: [("result", "ok")],
            factory: metricsFactory
        )
        failed = CoreMetrics.Counter(
            label: "pushgate_reloads_total",
            dimensions: [("result", "failed")],
            factory: metricsFactory
        )
    }

    /// One change, checked and ready: `apply` cannot fail.
    private struct Change {
        var what: String
        var apply: () -> Void
    }

    /// A reason to keep the whole running configuration: the key at fault and why.
    private struct Refusal: Error {
        var key: String
        var message: String
    }

    /// Reads, checks, and applies all or nothing; logs what happened and counts it.
    func reload(logger: Logger) async {
        let prepared: (changes: [Change], restart: [String])
        do {
            prepared = try await prepare(logger: logger)
        } catch let refusal as Refusal {
            failed.increment()
            logger.error(
                "configuration not reloaded; everything stays as it was",
                metadata: ["push.reload.key": "\(refusal.key)", "push.reload.error": "\(refusal.message)"]
            )
            return
        } catch {
            failed.increment()
            logger.error(
                "configuration not reloaded; everything stays as it was",
                metadata: ["push.reload.error": "\(error)"]
            )
            return
        }
        for change in prepared.changes { change.apply() }
        succeeded.increment()
        if !prepared.restart.isEmpty {
            logger.warning(
                "configuration changes that need a restart were ignored",
                metadata: ["push.reload.needs_restart": "\(prepared.restart.joined(separator: ","))"]
            )
        }
        logger.info(
            "configuration reloaded",
            metadata: [
                "push.reload.changed":
                    "\(prepared.changes.isEmpty ? "nothing" : prepared.changes.map(\.what).joined(separator: ","))"
            ]
        )
    }

    /// Everything a reload would change, checked; throws ``Refusal`` (or the error of a step) at the first
    /// problem, having changed nothing.
    private func prepare(logger: Logger) async throws -> (changes: [Change], restart: [String]) {
        let fresh: GatewayConfiguration
        let loaded: LoadedConfiguration
        do throws(ConfigurationProblem) {
            fresh = try await source.read()
            loaded = try fresh.loadCredentials(environment: source.environment, clock: clock)
        } catch {
            throw Refusal(key: error.key, message: error.message)
        }
        var restart = started.changesNeedingRestart(to: fresh)
        var changes: [Change] = []

        if let api, !started.apiKeys.isEmpty, !fresh.apiKeys.isEmpty {
            let keys = loaded.apiKeys.map { APIKey(sha256: $0.sha256, app: $0.app) }
            if keys != apiKeys.withLock({ $0 }) {
                do throws(HTTPAPIConfigurationError) {
                    try api.checkAPIKeys(keys)
                } catch {
                    throw Refusal(key: "apiKeys", message: error.message)
                }
                changes.append(
                    Change(what: "apiKeys") {
                        // Checked above with the same keys: cannot throw.
                        try? api.replaceAPIKeys(keys)
                        self.apiKeys.withLock { $0 = keys }
                        logger.info("API keys reloaded", metadata: ["http.api_keys": "\(keys.count)"])
                    }
                )
            }
        }

        if let httpTLS, let identity = loaded.httpTLS?.identity {
            changes.append(
                Change(what: "http.tls") {
                    httpTLS.install(identity)
                    logger.info(
                        "HTTP API certificate reloaded; new connections use it",
                        metadata: [
                            "http.tls.serial": "\(identity.serialNumber)",
                            "http.tls.not_after": "\(identity.notValidAfter.formatted(.iso8601))",
                        ]
                    )
                }
            )
        }

        let freshApps = Dictionary(loaded.apps.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for app in apps {
            guard let freshApp = freshApps[app.name] else { continue }
            if freshApp.topic != app.topic, !restart.contains("app.\(app.name).topic") {
                // The topic came from the new certificate's subject UID.
                restart.append("app.\(app.name).topic")
            }
            if let client = app.apns, freshApp.transport == .http2,
                !Self.isSame(client.authentication, freshApp.client.authentication)
            {
                let renewal: APNsClient.CredentialRenewal
                do {
                    renewal = try client.prepareRenewal(freshApp.client.authentication)
                } catch {
                    throw Refusal(key: "app.\(app.name).certificate", message: "\(error)")
                }
                let what = "app.\(app.name).\(Self.kind(of: renewal.authentication))"
                changes.append(
                    Change(what: what) {
                        let draining = client.renew(renewal)
                        logger.info(
                            "APNs credentials reloaded; new connections use them, the open ones drain",
                            metadata: Self.metadata(of: renewal.authentication, app: app.name, draining: draining)
                        )
                    }
                )
            }
            if let client = app.fcm, let freshFCM = freshApp.fcm,
                !client.serviceAccount.isSameAccount(as: freshFCM.serviceAccount)
            {
                let running = client.serviceAccount.projectID
                guard freshFCM.serviceAccount.projectID == running else {
                    throw Refusal(
                        key: "app.\(app.name).fcm.serviceAccount",
                        message:
                            "the service account belongs to project \(freshFCM.serviceAccount.projectID), the running one to \(running): another Firebase project needs a restart (its devices' tokens are the old project's)"
                    )
                }
                let renewal: FCMClient.CredentialRenewal
                do {
                    renewal = try client.prepareRenewal(serviceAccount: freshFCM.serviceAccount)
                } catch {
                    throw Refusal(key: "app.\(app.name).fcm.tokenUri", message: "\(error)")
                }
                let email = freshFCM.serviceAccount.clientEmail
                changes.append(
                    Change(what: "app.\(app.name).fcm.serviceAccount") {
                        let draining = client.renew(renewal)
                        logger.info(
                            "FCM service account reloaded; new access tokens are its, the open connections drain",
                            metadata: [
                                "push.app": "\(app.name)", "fcm.client_email": "\(email)",
                                "connection.draining": "\(draining)",
                            ]
                        )
                    }
                )
            }
            if let client = app.webPush, let freshWebPush = freshApp.webPush {
                let running = client.vapid
                if running.key.publicKeyBase64URL != freshWebPush.vapidKey.publicKeyBase64URL
                    || running.subject != freshWebPush.subject
                {
                    let key = freshWebPush.vapidKey
                    let subject = freshWebPush.subject
                    changes.append(
                        Change(what: "app.\(app.name).webpush") {
                            client.renew(vapidKey: key, subject: subject)
                            logger.info(
                                "VAPID key and subject reloaded; new messages carry tokens signed with them",
                                metadata: [
                                    "push.app": "\(app.name)",
                                    "webpush.vapid_public_key": "\(key.publicKeyBase64URL)",
                                    "webpush.subject": "\(subject)",
                                ]
                            )
                        }
                    )
                }
            }
        }
        return (changes, restart)
    }

    /// Whether two credentials are the same (same certificate and key, or same token key, id and team).
    static func isSame(_ running: APNsClient.Authentication, _ fresh: APNsClient.Authentication) -> Bool {
        switch (running, fresh) {
        case (.certificate(let running), .certificate(let fresh)):
            return running.isSame(as: fresh)
        case (.token(let running), .token(let fresh)):
            guard let running = running as? ProviderTokenManager, let fresh = fresh as? ProviderTokenManager else {
                return false
            }
            return running.signsLike(fresh)
        default:
            return false
        }
    }

    private static func kind(of authentication: APNsClient.Authentication) -> String {
        switch authentication {
        case .certificate: "certificate"
        case .token: "token"
        }
    }

    /// What identifies a credential in the log: the certificate's serial and expiry, or the token key's id
    /// and team; never key material.
    private static func metadata(
        of authentication: APNsClient.Authentication,
        app: String,
        draining: Int
    ) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["push.app": "\(app)", "connection.draining": "\(draining)"]
        switch authentication {
        case .certificate(let certificate):
            metadata["apns.certificate.serial"] = "\(certificate.serialNumber ?? "unknown")"
            metadata["apns.certificate.not_after"] = "\(certificate.notValidAfter?.formatted(.iso8601) ?? "unknown")"
        case .token(let source):
            if let manager = source as? ProviderTokenManager {
                metadata["apns.key_id"] = "\(manager.keyID)"
                metadata["apns.team_id"] = "\(manager.teamID)"
            }
        }
        return metadata
    }
}
