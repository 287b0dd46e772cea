public import APNsClient

extension NotificationTransport { public var inFlightCapacity: Int { 2_000 } }
