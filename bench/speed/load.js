// k6 load test of the server, the blog's four scenarios plus auto:
//   short/long audio x assisted true/false, and short/long with assisted "auto".
// Run through bench/speed/load.sh (it starts the server); by hand:
//   k6 run -e URL=http://127.0.0.1:8000/ -e AUDIO=short.wav -e ASSISTED=true -e VUS=2 -e ITERATIONS=6 bench/speed/load.js
import http from "k6/http";
import encoding from "k6/encoding";
import { check } from "k6";

const audio = open(__ENV.AUDIO, "b");
const assisted = __ENV.ASSISTED === "auto" ? "auto" : __ENV.ASSISTED === "true";
const body = JSON.stringify({
  inputs: encoding.b64encode(audio),
  parameters: { language: "en", assisted: assisted },
});

export const options = {
  scenarios: {
    load: {
      executor: "shared-iterations",
      vus: Number(__ENV.VUS || 2),
      iterations: Number(__ENV.ITERATIONS || 6),
      maxDuration: "30m",
    },
  },
  summaryTrendStats: ["avg", "med", "p(90)", "p(95)", "max"],
};

export default function () {
  const response = http.post(__ENV.URL, body, { headers: { "Content-Type": "application/json" }, timeout: "600s" });
  check(response, {
    "status 200": (r) => r.status === 200,
    "decoding reported": (r) => r.status === 200 && typeof r.json("decoding") === "string",
  });
}
