extension DeviceToken {
    /// A browser named by its endpoint alone: what the HTTP device routes look a Web Push device up by
    /// (its keys are the registry's). Only for finding, unassigning or removing a device: the registry
    /// matches Web Push devices by endpoint (``registryIdentity``), so this token finds the device
    /// whatever keys it was registered with; it carries no keys, so it is never sent to.
    public init(webPushEndpoint endpoint: String, field: String = "token") throws(ValidationError) {
        try WebPushSubscription.validateEndpoint(endpoint, field: field)
        self.init(storedWebPush: endpoint)
    }

    /// What makes two devices of an app one device in the registry: the ``storageKey`` for APNs and FCM;
    /// for Web Push `webpush:` and the endpoint, without the keys. A browser that subscribes again (new
    /// keys, same endpoint) is the same device: the registry replaces its keys instead of adding a second
    /// device that would get every notification twice, once undecryptable.
    package var registryIdentity: String {
        platform == .webpush ? Self.webPushStoragePrefix + webPushEndpoint : storageKey
    }

    /// The ``registryIdentity`` of a ``storageKey`` (the text of a token column).
    package static func registryIdentity(ofStorageKey key: String) -> Substring {
        guard key.hasPrefix(webPushStoragePrefix) else { return key[...] }
        return key.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false).first ?? key[...]
    }

    /// The storage keys of one Web Push device (one ``registryIdentity``) are the text range
    /// `(lower, upper)`, both bounds excluded, in byte order: `webpush:ENDPOINT ` is followed by the keys,
    /// and `!` is the byte after the space. Nil for other platforms, whose identity is the key itself.
    package var webPushStorageKeyRange: (lower: String, upper: String)? {
        guard platform == .webpush else { return nil }
        let identity = registryIdentity
        return (identity + " ", identity + "!")
    }
}
