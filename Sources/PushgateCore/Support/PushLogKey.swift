/// Log metadata keys that every component shares (`push.*`): what a log line is about, whichever
/// component wrote it. A component's own keys carry its own prefix (`udp.`, `http.`, `apns.`).
public enum PushLogKey {
    public static let requestID = "push.request_id"
    public static let app = "push.app"
    public static let device = "push.device"
    public static let group = "push.group"
}
