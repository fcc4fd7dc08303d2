/* Figures on phones (site_layout.css, part 3): a chapter's figure drawn wider than it is
 * shown can be tapped to open at its own size, full screen, scrolling sideways; a tap
 * closes it. Only where the figure is shown narrower than it was drawn (below 95 %). */
document.addEventListener("DOMContentLoaded", () => {
  const SHRUNK = 0.95;
  const phone = window.matchMedia("(max-width: 767.98px)");

  const mark = (img) => {
    const shrunk = img.naturalWidth && img.clientWidth < SHRUNK * img.naturalWidth;
    img.classList.toggle("zoomable", Boolean(phone.matches && shrunk));
  };

  const open = (img) => {
    const overlay = document.createElement("div");
    overlay.className = "figure-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "Figure at full size");
    const copy = document.createElement("img");
    copy.src = img.currentSrc || img.src;
    copy.alt = img.alt;
    copy.width = img.naturalWidth;
    overlay.appendChild(copy);
    overlay.addEventListener("click", () => overlay.remove());
    document.body.appendChild(overlay);
  };

  const images = document.querySelectorAll(".bd-article .cell_output img, .bd-article figure img");
  images.forEach((img) => {
    if (img.complete) mark(img);
    img.addEventListener("load", () => mark(img));
    img.addEventListener("click", () => {
      if (img.classList.contains("zoomable")) open(img);
    });
  });
  phone.addEventListener("change", () => images.forEach(mark));
  window.addEventListener("resize", () => images.forEach(mark));
});
