extension GatewayConfiguration {
    /// What a reload (SIGHUP) can apply without a restart: the API keys (`apiKeys`, `apiKey.*`, the key
    /// files' contents), each HTTP/2 app's APNs credentials (`certificate.*`, `token.*`: new files, new
    /// ids, or new contents of the same files) and each app's FCM service account (`fcm.serviceAccount`),
    /// and the HTTP API's certificate files (`http.tls.*`, when the API started with TLS). Everything else is fixed at start-up.
    ///
    /// The keys of `fresh` (the configuration read again) that differ from this one (what the gateway
    /// started with) in a part a reload cannot apply, in a stable order; a reload logs them as needing a
    /// restart and leaves them as they were. Pure: compares values, opens no file.
    public func changesNeedingRestart(to fresh: GatewayConfiguration) -> [String] {
        var keys: [String] = []
        func check<Value: Equatable>(_ key: String, _ running: Value, _ fresh: Value) {
            if running != fresh { keys.append(key) }
        }
        check("listen", listen, fresh.listen)
        check("udp.registrationPort", udp.registrationPort, fresh.udp.registrationPort)
        check("udp.notificationPort", udp.notificationPort, fresh.udp.notificationPort)
        check("udp.allow", udp.allow, fresh.udp.allow)
        check("http.port", http.port, fresh.http.port)
        check("http.host", http.host, fresh.http.host)
        // TLS or plain is decided at start-up; the files (paths and contents) are reloaded.
        check("http.tls", http.tls == nil, fresh.http.tls == nil)
        check("store.path", store.path, fresh.store.path)
        check("store.url", store.url, fresh.store.url)
        check("store.passwordFile", store.passwordFile, fresh.store.passwordFile)
        check("store.chunkSize", store.chunkSize, fresh.store.chunkSize)
        check("store.lease", store.lease, fresh.store.lease)
        check("store.minimumFreeBytes", store.minimumFreeBytes, fresh.store.minimumFreeBytes)
        check("instanceId", instanceID, fresh.instanceID)
        check("logLevel", logLevel, fresh.logLevel)
        check("logFormat", logFormat, fresh.logFormat)
        check("shutdown.timeout", shutdownTimeoutSeconds, fresh.shutdownTimeoutSeconds)
        check("dispatch.inFlightWindow", dispatchInFlightWindow, fresh.dispatchInFlightWindow)
        check("misconfiguration", misconfiguration, fresh.misconfiguration)
        // Whether the API asks for keys at all (and so which address it may bind) is decided at start-up;
        // which keys it accepts is not.
        check("apiKeys", apiKeys.isEmpty, fresh.apiKeys.isEmpty)
        check("apps", apps.map(\.name), fresh.apps.map(\.name))
        let freshApps = Dictionary(fresh.apps.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for app in apps {
            guard let freshApp = freshApps[app.name] else { continue }
            keys += app.changesNeedingRestart(to: freshApp).map { "app.\(app.name).\($0)" }
        }
        return keys
    }
}

extension GatewayConfiguration.App {
    /// The keys below `app.NAME.` that differ in a part a reload cannot apply.
    func changesNeedingRestart(to fresh: GatewayConfiguration.App) -> [String] {
        var keys: [String] = []
        func check<Value: Equatable>(_ key: String, _ running: Value, _ fresh: Value) {
            if running != fresh { keys.append(key) }
        }
        check("topic", topic, fresh.topic)
        check("environment", environment, fresh.environment)
        check("alternativePort", alternativePort, fresh.alternativePort)
        check("apnsHost", apnsHost, fresh.apnsHost)
        check("ca", caFile, fresh.caFile)
        check("pool", pool, fresh.pool)
        check("transport", transport, fresh.transport)
        check("legacy", legacy, fresh.legacy)
        // The legacy binary interface (retired by Apple) keeps the certificate it started with.
        if transport == .legacy || fresh.transport == .legacy {
            check("certificate", authentication, fresh.authentication)
        }
        switch (fcm, fresh.fcm) {
        case (nil, nil):
            break
        case (let running?, let fresh?):
            check("fcm.host", running.host, fresh.host)
            check("fcm.tokenUri", running.tokenURI, fresh.tokenURI)
            check("fcm.ca", running.caFile, fresh.caFile)
            check("fcm.pool.maxConnections", running.maximumConnections, fresh.maximumConnections)
            check("fcm.pool.maxStreams", running.maximumStreams, fresh.maximumStreams)
        default:
            keys.append("fcm")
        }
        // The VAPID key and subject are reloaded (a new key also needs every browser to subscribe again
        // with the new applicationServerKey); the CA and the pools' caps keep what the client started with.
        switch (webPush, fresh.webPush) {
        case (nil, nil):
            break
        case (let running?, let fresh?):
            check("webpush.ca", running.caFile, fresh.caFile)
            check(
                "webpush.pool.maxConnectionsPerOrigin",
                running.maximumConnectionsPerOrigin,
                fresh.maximumConnectionsPerOrigin
            )
            check("webpush.pool.maxConnections", running.maximumConnections, fresh.maximumConnections)
        default:
            keys.append("webpush")
        }
        return keys
    }
}
