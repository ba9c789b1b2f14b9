// A browser whose user refused the microphone: getUserMedia rejects as Chromium does then.
navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException("Permission denied", "NotAllowedError"));
