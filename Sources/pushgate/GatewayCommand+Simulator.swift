import APNsSimulator
import Crypto
import FCMSimulator
import Foundation
import Logging
import PushgateConfig
import WebPushSimulator

extension GatewayCommand {
    /// `--simulator`: runs an APNs, an FCM and a Web Push simulator in-process and hands `body` the
    /// configuration rewritten to deliver to them, with throwaway credentials written next to the APNs
    /// simulator's CA (removed afterwards).
    ///
    /// One APNs simulator for every app: HTTP/2 apps deliver with one token key (loaded the usual way, so
    /// they share one provider token); legacy apps, which have no token auth, with a client certificate
    /// its CA issues for their topic. Topics stay the apps' own. One FCM simulator for every app too, each
    /// app with its own throwaway service account (its own project) that the simulator's token endpoint
    /// knows. One Web Push simulator (two origins: HTTP/2 and HTTP/1.1-only) for every app, each app with
    /// a throwaway VAPID key; its control API hands out subscriptions bound to no key, which accept any.
    static func withSimulators(
        for configuration: GatewayConfiguration,
        logger: Logger,
        _ body: (GatewayConfiguration) async throws -> Void
    ) async throws {
        let key = P256.Signing.PrivateKey()
        let authority = try SimulatorCertificateAuthority()
        var simulatorConfiguration = APNsSimulator.Configuration()
        simulatorConfiguration.tls = .authority(authority)
        simulatorConfiguration.clientCertificateAuthorityPEM = authority.certificatePEM
        simulatorConfiguration.tokenKeys = [
            ProviderTokenKey(keyID: "SIMULATOR1", teamID: "SIMTEAM001", publicKey: key.publicKey)
        ]
        simulatorConfiguration.legacyPort = 0
        simulatorConfiguration.feedbackPort = 0
        simulatorConfiguration.logger = Logger(label: "pushgate.simulator")
        var fcmConfiguration = FCMSimulator.Configuration()
        fcmConfiguration.logger = Logger(label: "pushgate.fcm-simulator")
        var webPushConfiguration = WebPushSimulator.Configuration()
        webPushConfiguration.logger = Logger(label: "pushgate.webpush-simulator")
        try await APNsSimulator.withRunning(simulatorConfiguration) { running in
            try await FCMSimulator.withRunning(fcmConfiguration) { fcm in
                try await WebPushSimulator.withRunning(webPushConfiguration) { webPush in
                    logger.info(
                        "APNs, FCM and Web Push simulators running in-process",
                        metadata: [
                            "apns.simulator": "127.0.0.1:\(running.port)",
                            "apns.simulator.ca": "\(running.caCertificatePath ?? "")",
                            "apns.simulator.legacy": "127.0.0.1:\(running.legacyPort ?? 0)",
                            "apns.simulator.feedback": "127.0.0.1:\(running.feedbackPort ?? 0)",
                            "fcm.simulator": "\(fcm.host):\(fcm.port)",
                            "fcm.simulator.control": "\(fcm.host):\(fcm.controlPort ?? 0)",
                            "fcm.simulator.ca": "\(fcm.caCertificatePath)",
                            "webpush.simulator": "\(webPush.origins.joined(separator: ","))",
                            "webpush.simulator.control": "\(webPush.host):\(webPush.controlPort ?? 0)",
                            "webpush.simulator.ca": "\(webPush.caCertificatePath)",
                        ]
                    )
                    let directory = URL(fileURLWithPath: running.caCertificatePath!).deletingLastPathComponent()
                    let keyPath = directory.appendingPathComponent("simulator-auth-key-\(UUID().uuidString).p8").path
                    try writeKey(key.pemRepresentation, to: keyPath)
                    var written = [keyPath]
                    defer { for path in written { try? FileManager.default.removeItem(atPath: path) } }
                    var simulated = configuration
                    for index in simulated.apps.indices {
                        let name = simulated.apps[index].name
                        let topic = simulated.apps[index].topic ?? "com.example.pushgate"
                        simulated.apps[index].topic = topic
                        simulated.apps[index].apnsHost = "127.0.0.1:\(running.port)"
                        simulated.apps[index].caFile = running.caCertificatePath
                        if simulated.apps[index].transport == .legacy {
                            let issued = try authority.issueClientCertificate(topic: topic)
                            let stem = "simulator-client-\(index)-\(UUID().uuidString)"
                            let certificatePath = directory.appendingPathComponent("\(stem).pem").path
                            let privateKeyPath = directory.appendingPathComponent("\(stem).key").path
                            try issued.write(certificateTo: certificatePath, privateKeyTo: privateKeyPath)
                            written += [certificatePath, privateKeyPath]
                            simulated.apps[index].authentication = .certificate(
                                file: certificatePath,
                                key: privateKeyPath
                            )
                            simulated.apps[index].legacy.host = "127.0.0.1:\(running.legacyPort!)"
                            simulated.apps[index].legacy.feedbackHost = "127.0.0.1:\(running.feedbackPort!)"
                        } else {
                            simulated.apps[index].authentication = .token(
                                keyFile: keyPath,
                                keyID: "SIMULATOR1",
                                teamID: "SIMTEAM001"
                            )
                            simulated.apps[index].legacy = .init()
                        }
                        let account = try fcm.makeServiceAccount(projectID: "pushgate-simulated-\(name)")
                        let accountPath = directory.appendingPathComponent("simulator-fcm-\(UUID().uuidString).json")
                            .path
                        try account.write(to: accountPath)
                        written.append(accountPath)
                        var route = GatewayConfiguration.App.FCM(serviceAccountFile: accountPath)
                        route.host = "\(fcm.host):\(fcm.port)"
                        route.caFile = fcm.caCertificatePath
                        route.maximumConnections =
                            simulated.apps[index].fcm?.maximumConnections ?? route.maximumConnections
                        route.maximumStreams = simulated.apps[index].fcm?.maximumStreams
                        simulated.apps[index].fcm = route
                        let vapidPath = directory.appendingPathComponent("simulator-vapid-\(UUID().uuidString).pem")
                            .path
                        try writeKey(P256.Signing.PrivateKey().pemRepresentation, to: vapidPath)
                        written.append(vapidPath)
                        simulated.apps[index].webPush = simulatedWebPushRoute(
                            keeping: simulated.apps[index].webPush,
                            vapidKeyFile: vapidPath,
                            simulator: webPush
                        )
                    }
                    try await body(simulated)
                }
            }
        }
    }

    /// A throwaway private key, readable by its owner only.
    private static func writeKey(_ pem: String, to path: String) throws {
        guard
            FileManager.default.createFile(
                atPath: path,
                contents: Data(pem.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw ConfigurationError("--simulator: cannot write a throwaway key to \(path)") }
    }

    /// An app's Web Push route to the simulator: its throwaway VAPID key and the simulator's CA, keeping the
    /// app's own pool caps.
    private static func simulatedWebPushRoute(
        keeping configured: GatewayConfiguration.App.WebPush?,
        vapidKeyFile: String,
        simulator: RunningWebPushSimulator
    ) -> GatewayConfiguration.App.WebPush {
        var route = GatewayConfiguration.App.WebPush(
            vapidKeyFile: vapidKeyFile,
            subject: "mailto:simulator@pushgate.invalid"
        )
        route.caFile = simulator.caCertificatePath
        if let configured {
            route.maximumConnectionsPerOrigin = configured.maximumConnectionsPerOrigin
            route.maximumConnections = configured.maximumConnections
        }
        return route
    }
}
